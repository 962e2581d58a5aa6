//! Open.ChannelSequence and the open's outstanding-request counts ([MS-SMB2]
//! 3.3.5.2.10, 3.x dialects): a client that loses a channel advances its
//! ChannelSequence and replays on another channel what was in flight. The open
//! counts the requests it is working on that carry its current sequence
//! (OutstandingRequestCount) and those still running from before the last
//! advance (OutstandingPreRequestCount). A request with an older sequence, or a
//! replay while requests of an older sequence are still running here, may be a
//! stale copy of something the client already replayed: a modifying one (WRITE,
//! SET_INFO, IOCTL) is refused with STATUS_FILE_NOT_AVAILABLE, and the client
//! replays it again later.

use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use smbx_wire::NtStatus;

/// The ChannelSequence state of one open.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChannelSequence {
    /// Open.ChannelSequence.
    current: u16,
    /// Open.OutstandingRequestCount.
    outstanding: u16,
    /// Open.OutstandingPreRequestCount.
    pre_outstanding: u16,
}

impl ChannelSequence {
    /// Starts at `csn` (the CREATE's), with nothing outstanding.
    pub fn set(&mut self, csn: u16) {
        self.current = csn;
    }

    /// Open.ChannelSequence now.
    pub fn current(&self) -> u16 {
        self.current
    }

    /// (OutstandingRequestCount, OutstandingPreRequestCount).
    pub fn counts(&self) -> (u16, u16) {
        (self.outstanding, self.pre_outstanding)
    }

    /// Admits a request with ChannelSequence `csn` (a replay if `replay`).
    /// Ok(true): it is counted, and [`ChannelSequence::release`] must be called
    /// with `csn` when it completes; Ok(false): it runs uncounted (an older
    /// sequence on a request that does not modify the file); Err: refused.
    ///
    /// The same sequence is counted in; a newer one (16-bit difference up to
    /// 0x7FFF) becomes the open's and moves the requests outstanding so far to
    /// the "pre" count. A replay is admitted this way only while no request of
    /// an older sequence is outstanding.
    pub fn admit(&mut self, csn: u16, replay: bool, modifying: bool) -> Result<bool, NtStatus> {
        let diff = csn.wrapping_sub(self.current);
        let stale_in_flight = replay && self.pre_outstanding > 0;
        if diff == 0 && !stale_in_flight {
            self.outstanding = self.outstanding.saturating_add(1);
            return Ok(true);
        }
        if diff != 0 && diff <= 0x7FFF && !stale_in_flight {
            self.pre_outstanding = self.pre_outstanding.saturating_add(self.outstanding);
            self.outstanding = 1;
            self.current = csn;
            return Ok(true);
        }
        if modifying {
            Err(NtStatus::FILE_NOT_AVAILABLE)
        } else {
            Ok(false)
        }
    }

    /// A counted request with ChannelSequence `csn` completed.
    pub fn release(&mut self, csn: u16) {
        let c = if csn == self.current {
            &mut self.outstanding
        } else {
            &mut self.pre_outstanding
        };
        *c = c.saturating_sub(1);
    }
}

/// Open.ChannelSequence and its counts, shared by the open and the requests
/// counted on it.
pub type Shared = Arc<Mutex<ChannelSequence>>;

/// A request counted as outstanding on an open until this drops: when the
/// request's final response is built (an async one's too: the dispatcher keeps
/// this in the operation's future, [`Outstanding::held_during`], not in the
/// request that answered STATUS_PENDING).
pub struct Outstanding {
    seq: Shared,
    csn: u16,
}

impl Outstanding {
    /// Admits a request with ChannelSequence `csn` on `seq` (see
    /// [`ChannelSequence::admit`]): the guard that counts it when it is counted,
    /// None when it runs uncounted; a stale modifying request is refused.
    pub fn admit(
        seq: &Shared,
        csn: u16,
        replay: bool,
        modifying: bool,
    ) -> Result<Option<Outstanding>, NtStatus> {
        Ok(seq
            .lock()
            .admit(csn, replay, modifying)?
            .then(|| Outstanding {
                seq: seq.clone(),
                csn,
            }))
    }

    /// Runs `fut` (the rest of an operation that went async) and keeps the
    /// request counted until it completes.
    pub async fn held_during<F: Future>(self, fut: F) -> F::Output {
        let out = fut.await;
        drop(self);
        out
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.seq.lock().release(self.csn);
    }
}

impl std::fmt::Debug for Outstanding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outstanding")
            .field("csn", &self.csn)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_sequence_as_3_3_5_2_10_says() {
        let mut s = ChannelSequence::default();
        s.set(5);
        // Two requests on the current sequence.
        assert_eq!(s.admit(5, false, true), Ok(true));
        assert_eq!(s.admit(5, false, false), Ok(true));
        assert_eq!(s.counts(), (2, 0));
        // A channel failed: the client advanced to 6. The two requests from
        // before are "pre" now; the new one is counted on 6.
        assert_eq!(s.admit(6, true, true), Ok(true));
        assert_eq!((s.current(), s.counts()), (6, (1, 2)));
        // A replay on 6 while the old ones are still running here: refused if
        // it modifies (it may be a copy of one of them), uncounted if not.
        assert_eq!(
            s.admit(6, true, true),
            Err(NtStatus::FILE_NOT_AVAILABLE),
            "a replay with the current sequence is refused while older requests run"
        );
        assert_eq!(s.admit(6, true, false), Ok(false));
        // A plain request on 6 is fine.
        assert_eq!(s.admit(6, false, true), Ok(true));
        assert_eq!(s.counts(), (2, 2));
        // A stale copy from the old channel (sequence 5).
        assert_eq!(s.admit(5, false, true), Err(NtStatus::FILE_NOT_AVAILABLE));
        assert_eq!(s.admit(5, false, false), Ok(false));
        // The old requests complete: now the replay is admitted.
        s.release(5);
        s.release(5);
        assert_eq!(s.counts(), (2, 0));
        assert_eq!(s.admit(6, true, true), Ok(true));
        s.release(6);
        s.release(6);
        s.release(6);
        assert_eq!(s.counts(), (0, 0));
        // Releases never go below zero.
        s.release(6);
        s.release(1);
        assert_eq!(s.counts(), (0, 0));
    }

    #[tokio::test]
    async fn an_async_request_is_outstanding_until_its_final_response() {
        let seq: Shared = Arc::default();
        seq.lock().set(3);
        let guard = Outstanding::admit(&seq, 3, false, true)
            .unwrap()
            .expect("counted");
        assert_eq!(seq.lock().counts(), (1, 0));
        // The request answered STATUS_PENDING; the rest of it runs later.
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let op = tokio::spawn(guard.held_during(async move {
            let _ = finished.await;
        }));
        tokio::task::yield_now().await;
        // The client lost the channel and advanced to 4: the async request is
        // still running here, so a replay on 4 may be a copy of it.
        assert_eq!(seq.lock().counts(), (1, 0));
        let newer = Outstanding::admit(&seq, 4, false, true)
            .unwrap()
            .expect("counted");
        assert_eq!(seq.lock().counts(), (1, 1));
        assert_eq!(
            Outstanding::admit(&seq, 4, true, true).unwrap_err(),
            NtStatus::FILE_NOT_AVAILABLE
        );
        // Its final response: the count ends, and the replay is admitted.
        done.send(()).unwrap();
        op.await.unwrap();
        assert_eq!(seq.lock().counts(), (1, 0));
        let replay = Outstanding::admit(&seq, 4, true, true).unwrap();
        assert!(replay.is_some());
        drop((newer, replay));
        assert_eq!(seq.lock().counts(), (0, 0));
        // An uncounted request (older sequence, not modifying) has no guard.
        assert!(Outstanding::admit(&seq, 3, false, false).unwrap().is_none());
    }

    #[test]
    fn sixteen_bit_wrap() {
        let mut s = ChannelSequence::default();
        s.set(0xFFFF);
        // 0 is one ahead of 0xFFFF.
        assert_eq!(s.admit(0, false, true), Ok(true));
        assert_eq!(s.current(), 0);
        // 0x8000 ahead is "older", not newer.
        assert_eq!(
            s.admit(0x8000, false, true),
            Err(NtStatus::FILE_NOT_AVAILABLE)
        );
        assert_eq!(s.admit(0x7FFF, false, true), Ok(true));
        assert_eq!(s.current(), 0x7FFF);
    }
}
