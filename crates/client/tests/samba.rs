//! The client against Samba's smbd (Debian). smbd must be installed: these tests fail,
//! never skip, without it.

mod common;
mod scenarios;

use common::start_samba;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dialect_with_signing_required() {
    scenarios::every_dialect_with_signing_required(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_311_signing_algorithm() {
    scenarios::every_311_signing_algorithm(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cipher_client_requested() {
    scenarios::every_cipher_client_requested(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_that_requires_encryption() {
    scenarios::share_that_requires_encryption(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_operations_and_errors() {
    scenarios::file_operations_and_errors(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight() {
    scenarios::many_requests_in_flight(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_round_trip() {
    scenarios::big_round_trip(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_and_compound_read() {
    scenarios::url_and_compound_read(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_after_drop() {
    scenarios::reconnect_after_drop(start_samba).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_bytes_writes() {
    scenarios::shared_bytes_writes(start_samba).await;
}
