//! Task helpers shared by the smbx crates, std only:
//!
//! - [`together()`]: two futures run in one task, each polled when it was woken,
//!   without waking the task for what one does for the other while it runs (an
//!   SMB Direct driver and the loop that uses its link).
//! - [`WokenSet`]: futures of one type, each polled again only when it was woken,
//!   without `FuturesUnordered`'s wake of its own task (the bench's I/Os of one
//!   queue, the requests a server connection's read loop parks).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
mod test_waker;
pub mod together;
pub mod woken_set;

pub use together::{together, Together};
pub use woken_set::{WokenSet, WokenWatch};
