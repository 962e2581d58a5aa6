//! The SMB Direct message link: a message queued in place with `try_send` (its
//! budget hold released once queued, Send with Invalidate asked for by the
//! `Outgoing`) arrives whole at the peer's receiver, which also takes messages
//! already reassembled in place; the link's capabilities (its RDMA side, its
//! addresses, its label) are what the server and the client ask instead of the
//! transport; a closed link fails `try_send` instead of queueing.

use std::sync::Arc;
use std::time::Duration;

use smbx_transport::link::{self, MessageReceiver, MessageSender, Outgoing, Transport};
use tokio::sync::Semaphore;

mod common;
use common::pair;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_link_sends_in_place_and_receives_whole_messages() {
    let (s, c) = pair().await;
    let (stx, mut srx) = link::direct(s.clone());
    let (ctx, mut crx) = link::direct(c.clone());

    // What the link is, asked of the link.
    assert_eq!(stx.transport(), Transport::SmbDirect);
    assert_eq!(stx.transport().label(), "smbdirect");
    assert!(stx.rdma().is_some_and(|l| Arc::ptr_eq(l, &s)));
    assert_eq!(stx.peer_addr(), s.peer_addr());
    assert_eq!(stx.local_addr(), ctx.peer_addr());
    assert!(!stx.sends_file_tails());
    assert!(stx.max_message().is_some());
    // Over soft-iWARP both ends move READs by RDMA only above 16 KiB, WRITEs above 32 KiB.
    let soft = (16 * 1024, 32 * 1024);
    assert_eq!((s.rdma_threshold(true), s.rdma_threshold(false)), soft);
    assert_eq!((c.rdma_threshold(true), c.rdma_threshold(false)), soft);

    // Nothing has arrived: nothing to take in place.
    assert!(c.try_recv().is_none());

    // Queued in place: the hold goes back at once, the message (after `start`)
    // arrives whole, messages in order, a large one reassembled from fragments.
    let budget = Arc::new(Semaphore::new(10));
    let large: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = Vec::new();
    for (i, body) in [b"first".to_vec(), large.clone(), b"third".to_vec()]
        .into_iter()
        .enumerate()
    {
        let mut buf = vec![0xee; 8];
        buf.extend_from_slice(&body);
        let mut out = Outgoing::new(buf);
        out.start = 8;
        out.hold = Some(budget.clone().acquire_many_owned(3).await.unwrap());
        stx.try_send(out)
            .unwrap_or_else(|e| panic!("message {i} not queued: {e:?}"));
        assert_eq!(budget.available_permits(), 10);
        sent.push(body);
    }
    for want in &sent {
        let got = tokio::time::timeout(Duration::from_secs(10), crx.recv())
            .await
            .expect("message arrives")
            .unwrap()
            .unwrap();
        assert!(got.bytes() == want, "message of {} bytes", want.len());
    }

    // A message that arrived while nobody waited is taken in place.
    ctx.send(
        {
            let mut b = vec![0; link::PREFIX_ROOM];
            b.extend_from_slice(b"back");
            b
        },
        link::PREFIX_ROOM,
    )
    .unwrap();
    let mut got = None;
    for _ in 0..1000 {
        got = s.try_recv();
        if got.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(got.as_ref().map(|m| m.bytes()), Some(&b"back"[..]));

    // Closed: refused, not queued.
    s.close().await;
    let out = Outgoing::new(b"late".to_vec());
    assert!(matches!(
        stx.try_send(out),
        Err(link::TrySendError::Failed(_))
    ));
    srx.close().await;
}
