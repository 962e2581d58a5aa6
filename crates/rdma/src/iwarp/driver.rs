//! The thin tokio driver: one task per connection moving bytes between the
//! TCP socket and the [`Engine`], with no per-FPDU allocation (reusable
//! receive and write buffers).

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::{Duration, Instant};

use super::engine::Engine;
use super::qp::QpShared;
use crate::source::FileRange;
use crate::types::CloseReason;

const RBUF: usize = 256 * 1024;
/// Least room left at the receive buffer's end before it is compacted, with
/// standard FPDUs (one of 64 KiB fits); large ones ask for theirs
/// ([`Engine::max_fpdu_in`]).
const COMPACT_AT: usize = 70_000;
const WBUDGET: usize = 256 * 1024;
/// How long an initiator waits for the peer's first bytes before it sends a
/// zero-length RDMA Write to wake the peer's receive path, and how often.
const NUDGE_AFTER: Duration = Duration::from_millis(200);
const MAX_NUDGES: u32 = 25;
/// How many messages the driver hands on from the receive buffer, at most, before
/// it lets their consumers run and sends what they posted, then goes on with the
/// rest of the buffer ([`Engine::on_input_some`]), when the consumer gave no hint
/// of how many it has coming ([`rx_batch`]). A socket read can hold a whole queue
/// depth of small messages (32 4 KiB READ responses, or requests); handed on all
/// at once, the answers to all of them leave together after the last is done, and
/// the peer idles until then: the two sides take turns instead of working at once.
/// A received Send that fills its receive buffer does not count (the engine takes
/// it for a fragment with more to follow): an 8 KiB READ response from a peer that
/// sends 8192-byte messages comes as two SMB Direct messages, and is one message
/// here.
const RX_BATCH: usize = 16;

/// The smallest batch [`rx_batch`] makes (half of a queue depth of 8).
const RX_BATCH_MIN: usize = 4;

/// The batch for the next [`Engine::on_input_some`]: half of what the consumer
/// says the peer has in flight ([`crate::QueuePair::set_in_flight`]), at least
/// [`RX_BATCH_MIN`]; [`RX_BATCH`] without a hint. Half splits a queue depth in
/// two halves that the two sides work on at the same time. 4 KiB random reads
/// over SMB Direct, the client's hint against a fixed 16, SCHED_RR, alternated:
/// -o16 (a batch of 8 instead of all 16) 1.16-1.62x the IOPS in 10 of 10 pairs;
/// -o8 (4 instead of 8) higher in 8 of 11; -o32 and -o64 as before or better
/// (16 and 32). The server gives no hint: the requests it has received and not
/// answered are only those the batch before let through, so half of that shrinks
/// run after run (to 4: -o32 IOPS 0.75-0.92x).
fn rx_batch(qp: &QpShared) -> usize {
    qp.in_flight()
        .map_or(RX_BATCH, |n| (n / 2).max(RX_BATCH_MIN))
}

/// Most bytes of a long tagged payload placed by one read. A large FPDU (up to
/// 512 KiB) arrives in pieces when the sender's congestion control paces it (the
/// system's bbr does, even on loopback): a read asking for all of it returns a
/// piece and waits in epoll for the next (3-5 waits per 512 KiB READ). Reads of
/// at most 128 KiB mostly find their bytes already queued (s38, bbr, 512 KiB
/// READ QD8, 9 alternated pairs against standard FPDUs: MB/s higher in 6, client
/// CPU lower in 7, server CPU lower in 6; a 64 KiB cap won 5 of 12 in MB/s).
const PLACE_MAX: usize = 128 * 1024;

/// The socket's receive low-water mark while a long tagged payload is placed
/// ([`crate::sock::set_recv_lowat`]), after a placing read came back short: the
/// payload's bytes still to come, so the next wake comes once they are all queued
/// (as Direct TCP's reader waits for a body) rather than at each paced piece, and
/// the reads that follow each find their [`PLACE_MAX`] there. 1 otherwise (the
/// system's rule), set back as soon as the placement is done. The peer is bound to
/// send those bytes (its FPDU has begun), so the wait cannot outlast them; Linux
/// caps the mark at half the receive buffer. s39, bbr, unpinned, loaded machine,
/// 512 KiB READ QD8, 6 alternated pairs against no mark: MB/s higher in 6, client
/// CPU per READ lower in 6, server's in 5; client epoll waits per READ 0.56-0.77
/// against 1.19-2.80. 64 KiB READ: no loss (higher 3 of 4).
fn placing_lowat(left: usize, short: bool, now: usize) -> usize {
    match left {
        0 => 1,
        _ if short => left,
        _ => now,
    }
}

/// One non-blocking read (`read` is `try_read` or `try_read_vectored`). A read
/// that did not fill its buffers also clears the socket's read readiness, as
/// tokio's own `poll_read` does: on epoll it shows the socket drained, so the
/// next `readable()` waits for new bytes instead of returning at once for a read
/// that would fail with EAGAIN (one system call less per message received).
fn read_drained(
    stream: &TcpStream,
    read: impl FnOnce(&TcpStream) -> io::Result<usize>,
    want: usize,
) -> io::Result<usize> {
    let mut got = 0;
    let r = stream.try_io(Interest::READABLE, || {
        got = read(stream)?;
        if got > 0 && got < want {
            // Clears the readiness this read was made under (no later one).
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(got)
    });
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    }
}

/// Sends up to `n` bytes of `src` from byte `at` into the socket (sendfile),
/// without waiting: `WouldBlock` clears the socket's write readiness. An error
/// other than the socket's own (EAGAIN, a broken connection) reports 0 bytes, as
/// the end of the file does: the engine then reads the rest in
/// ([`Engine::file_ended`]).
fn send_file(stream: &TcpStream, src: &dyn FileRange, at: usize, n: usize) -> io::Result<usize> {
    match stream.try_io(Interest::WRITABLE, || src.send_part(stream.as_fd(), at, n)) {
        Err(e)
            if e.kind() != io::ErrorKind::WouldBlock
                && !e
                    .raw_os_error()
                    .is_some_and(|c| c == libc::EPIPE || c == libc::ECONNRESET) =>
        {
            Ok(0)
        }
        r => r,
    }
}

/// Writes `iov` without waiting, with `MSG_MORE` ([`crate::sock::send_more`]): an
/// FPDU's header waits in the socket for the payload `sendfile` sends after it.
/// `WouldBlock` clears the write readiness.
fn send_more(stream: &TcpStream, iov: &[io::IoSlice<'_>]) -> io::Result<usize> {
    stream.try_io(Interest::WRITABLE, || {
        crate::sock::send_more(stream.as_fd(), iov)
    })
}

/// One vectored write of what is queued from `out[wpos..]` on (payloads from
/// their regions, files with sendfile); a file that ended before its payload was
/// sent goes on as the bytes read in, zeros past its end.
fn write_some(eng: &mut Engine, stream: &TcpStream, out: &[u8], wpos: usize) -> io::Result<usize> {
    loop {
        let r = eng.write_vectored(
            out,
            wpos,
            |iov, more| {
                if more {
                    send_more(stream, iov)
                } else {
                    stream.try_write_vectored(iov)
                }
            },
            |src, at, n| send_file(stream, src, at, n),
        );
        match r {
            Ok(0) if eng.file_ended() => {}
            r => return r,
        }
    }
}

/// Run a connection until it closes. `leftover` are bytes read during MPA
/// setup that already belong to the FPDU stream. An `initiator` that has sent
/// FPDUs but heard nothing back since the MPA Reply sends a zero-length RDMA
/// Write every [`NUDGE_AFTER`] (at most [`MAX_NUDGES`]): Linux siw may leave
/// the first FPDUs unread in its socket until more bytes arrive (see
/// [`Engine::encode_nudge`]).
pub(crate) async fn run(
    mut stream: TcpStream,
    mut eng: Engine,
    qp: Arc<QpShared>,
    leftover: Vec<u8>,
    initiator: bool,
) {
    let mut heard = !leftover.is_empty();
    let mut nudges = if initiator { MAX_NUDGES } else { 0 };
    let mut next_nudge: Option<Instant> = None;
    let mut sent = false;
    // Room for the longest FPDU the peer may send whole (decoded from the buffer when
    // it is not placed as it arrives): the buffer is compacted when less is left.
    let room = eng.max_fpdu_in().max(COMPACT_AT);
    let mut rbuf = vec![0u8; RBUF.max(2 * room).max(leftover.len() * 2)];
    let (mut rs, mut re) = (0usize, leftover.len());
    rbuf[..re].copy_from_slice(&leftover);
    let mut out: Vec<u8> = Vec::with_capacity(WBUDGET + 70_000);
    let mut wpos = 0usize;
    // The socket's receive low-water mark as last set (1: the system's rule).
    let mut lowat = 1usize;
    // Payloads go out from their regions (writev), not copied into `out`.
    eng.set_vectored(true);
    // Process anything that arrived with the MPA reply.
    let (n, mut backlog) = eng.on_input_some(&rbuf[rs..re], &mut out, rx_batch(&qp));
    rs += n;
    loop {
        if eng.closed().is_none() && qp.lock().disconnect {
            eng.set_closed(CloseReason::LocalDisconnect);
        }
        if eng.closed().is_none() && out.len() - wpos + eng.queued_payload() < WBUDGET / 2 {
            if wpos == out.len() && !eng.has_holes() {
                out.clear();
                wpos = 0;
            }
            eng.pump_tx(&mut out, WBUDGET);
        }
        eng.deliver_completions();
        // Write as much as the socket takes now.
        let mut topped = false;
        while wpos < out.len() || eng.has_holes() {
            if !eng.has_holes() && (eng.in_message() || (!topped && eng.has_tx_work())) {
                topped = true;
                // Only `out`'s own bytes are left, ending with the trailer of the
                // last FPDU a long message had encoded when it reached WBUDGET:
                // its next FPDUs are encoded behind them first, so the trailer
                // leaves with the next header (MSG_MORE before a file's payload)
                // instead of in a segment of its own after a pass of the loop (a
                // writev of its own, twice per 512 KiB READ sent from a file).
                eng.pump_tx(&mut out, WBUDGET);
            }
            match write_some(&mut eng, &stream, &out, wpos) {
                Ok(0) => break,
                Ok(k) => {
                    wpos = eng.advance(&out, wpos, k);
                    sent = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    eng.set_closed(CloseReason::Transport(e.to_string()));
                    break;
                }
            }
        }
        if wpos == out.len() && !eng.has_holes() {
            out.clear();
            wpos = 0;
        }
        // Sends and Writes whose last byte the socket just took complete now.
        eng.deliver_completions();
        if eng.closed().is_some() {
            break;
        }
        if heard || nudges == 0 {
            next_nudge = None;
        } else if sent && next_nudge.is_none() {
            next_nudge = Some(Instant::now() + NUDGE_AFTER);
        }
        if backlog {
            // Whole FPDUs are still in the receive buffer, behind a batch whose
            // completions went out above: their consumers run first (and what they
            // post goes out at the top of the loop), then the next batch. Nothing is
            // read from the socket before the buffer's FPDUs are taken.
            tokio::task::yield_now().await;
            let n;
            (n, backlog) = eng.on_input_some(&rbuf[rs..re], &mut out, rx_batch(&qp));
            rs += n;
            continue;
        }
        let want_write = (wpos < out.len() || eng.has_holes()) && eng.closed().is_none();
        let more_tx = !want_write && eng.has_tx_work();
        if more_tx {
            // The pass stopped at WBUDGET with more to send: the next pass goes on
            // at once, and the task gives its worker up only once tokio's
            // cooperative budget for this poll is spent, not at every WBUDGET. A
            // yield is a wake of the task by itself, which tokio schedules by
            // waking the idle worker (a futex wake, a context switch there, and
            // the connection's task moving between the workers): 8 64 KiB READs
            // queued are 512 KiB, one such yield per 4 READs. Still read what is
            // pending so neither side deadlocks.
            tokio::task::coop::consume_budget().await;
        }
        tokio::select! {
            r = stream.readable() => {
                if let Err(e) = r {
                    eng.set_closed(CloseReason::Transport(e.to_string()));
                    continue;
                }
                if let Some((sink, off, left)) = eng.placement_file().filter(|_| rs == re) {
                    // A long Read Response into a file: spliced from the socket into
                    // it (the next read takes its trailer and what follows).
                    let got = stream.try_io(Interest::READABLE, || {
                        sink.recv_part(stream.as_fd(), off, left)
                    });
                    match got {
                        Ok(0) => eng.set_closed(CloseReason::PeerDisconnect),
                        Ok(k) => {
                            heard = true;
                            eng.placed(k);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => eng.set_closed(CloseReason::Transport(e.to_string())),
                    }
                    continue;
                }
                if let Some((mr, off, left)) = eng.placement().map(|(m, o, l)| (m.clone(), o, l)) {
                    // A long tagged payload: straight from the socket into its region,
                    // and in the same read what follows it (its trailer and the next
                    // FPDU's header) into the receive buffer.
                    if rs == re {
                        rs = 0;
                        re = 0;
                    }
                    // At most PLACE_MAX a read: paced data arrives in pieces.
                    let take = left.min(PLACE_MAX);
                    let tail = if rs == re && take == left { eng.placement_tail() } else { 0 };
                    let end = (re + tail).min(rbuf.len());
                    let want = take + (end - re);
                    let got = match mr.lock().get_mut(off..off + take) {
                        Some(d) => {
                            let mut iov = [
                                io::IoSliceMut::new(d),
                                io::IoSliceMut::new(&mut rbuf[re..end]),
                            ];
                            read_drained(&stream, |s| s.try_read_vectored(&mut iov), want)
                        }
                        None => Err(io::Error::other("placement outside its region")),
                    };
                    let short = match &got {
                        Ok(k) => *k < want,
                        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
                    };
                    match got {
                        Ok(0) => eng.set_closed(CloseReason::PeerDisconnect),
                        Ok(k) => {
                            heard = true;
                            eng.placed(k.min(left));
                            if k > left {
                                re += k - left;
                                let n;
                                (n, backlog) = eng.on_input_some(&rbuf[rs..re], &mut out, rx_batch(&qp));
                                rs += n;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => eng.set_closed(CloseReason::Transport(e.to_string())),
                    }
                    let left = eng.placement().map_or(0, |(_, _, l)| l);
                    let mark = placing_lowat(left, short, lowat);
                    if mark != lowat {
                        // Best effort: without it the driver only wakes more often.
                        let _ = crate::sock::set_recv_lowat(stream.as_fd(), mark);
                        lowat = mark;
                    }
                    continue;
                }
                if rs == re { rs = 0; re = 0; }
                if rbuf.len() - re < room {
                    rbuf.copy_within(rs..re, 0);
                    re -= rs;
                    rs = 0;
                }
                // Among long tagged FPDUs, read just past the next FPDU's header.
                let end = eng.read_limit().map_or(rbuf.len(), |n| (re + n).min(rbuf.len()));
                let buf = &mut rbuf[re..end];
                let want = buf.len();
                match read_drained(&stream, |s| s.try_read(buf), want) {
                    Ok(0) => eng.set_closed(CloseReason::PeerDisconnect),
                    Ok(k) => {
                        heard = true;
                        re += k;
                        let n;
                        (n, backlog) = eng.on_input_some(&rbuf[rs..re], &mut out, rx_batch(&qp));
                        rs += n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => eng.set_closed(CloseReason::Transport(e.to_string())),
                }
            }
            r = stream.writable(), if want_write => {
                if let Err(e) = r {
                    eng.set_closed(CloseReason::Transport(e.to_string()));
                }
            }
            _ = qp.wake.notified(), if !want_write && !more_tx => {}
            // A disconnect is heard while the socket is full too (a peer that stopped
            // reading); work posted meanwhile is not (it would only find the socket full).
            _ = qp.disconnect_ev.notified(), if want_write || more_tx => {}
            _ = std::future::ready(()), if more_tx => {}
            () = async {
                match next_nudge {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            }, if next_nudge.is_some() => {
                eng.encode_nudge(&mut out);
                nudges -= 1;
                next_nudge = Some(Instant::now() + NUDGE_AFTER);
            }
        }
    }
    // Clean teardown: flush what is queued (e.g. a Terminate), then FIN.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while wpos < out.len() || eng.has_holes() {
            match write_some(&mut eng, &stream, &out, wpos) {
                Ok(0) => break,
                Ok(k) => wpos = eng.advance(&out, wpos, k),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if stream.writable().await.is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    })
    .await;
    let _ = stream.shutdown().await;
    eng.shutdown();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iwarp::mr::SoftPd;
    use crate::iwarp::qp::SoftQp;
    use crate::provider::QueuePair;
    use crate::types::QpCaps;

    /// The mark is raised to the payload still to come only after a short placing
    /// read, kept while the placement goes on, and back to 1 once it is done.
    #[test]
    fn the_placing_mark_waits_for_the_rest_of_the_payload() {
        // A full read keeps the mark as it is (1, or the one a short read set).
        assert_eq!(placing_lowat(400_000, false, 1), 1);
        assert_eq!(placing_lowat(300_000, false, 400_000), 400_000);
        // A short read waits for all that is left of the payload.
        assert_eq!(placing_lowat(400_000, true, 1), 400_000);
        assert_eq!(placing_lowat(12_345, true, 400_000), 12_345);
        // Placed whole (or no placement): the system's rule again.
        assert_eq!(placing_lowat(0, true, 400_000), 1);
        assert_eq!(placing_lowat(0, false, 12_345), 1);
        assert_eq!(placing_lowat(0, false, 1), 1);
    }

    /// The batch is half of what the consumer says the peer has in flight, at
    /// least [`RX_BATCH_MIN`]; [`RX_BATCH`] until it says anything.
    #[test]
    fn the_receive_batch_is_half_the_hinted_in_flight() {
        let shared = QpShared::new(SoftPd::new(), QpCaps::default());
        let qp = SoftQp::new(shared.clone());
        assert_eq!(rx_batch(&shared), RX_BATCH);
        for (n, want) in [(32, 16), (16, 8), (64, 32), (8, 4), (9, 4), (1, 4), (0, 4)] {
            qp.set_in_flight(n);
            assert_eq!(rx_batch(&shared), want, "{n} in flight");
        }
        // A hint past u32 is taken as the largest, not wrapped.
        qp.set_in_flight(usize::MAX);
        assert_eq!(rx_batch(&shared), (u32::MAX as usize - 1) / 2);
    }
}
