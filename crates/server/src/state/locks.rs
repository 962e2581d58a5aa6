//! Byte-range locks ([MS-FSA] 2.1.5.7, [MS-SMB2] 3.3.5.14) of one file or stream.
//!
//! Each [`crate::state::file::SharedFile`] carries a [`ByteRangeLocks`]; locks are owned
//! by an open, identified by its entry id in that file (`FileOpen::entry_id`).
//!
//! Semantics (Windows, as smbtorture `smb2.lock` checks them):
//! - Two ranges overlap when they share a byte; a zero-length range at `x` overlaps a
//!   range `[a, a+n)` only when `a < x < a+n` (never another zero-length range).
//! - Shared locks never conflict with each other; a shared lock may stack on an
//!   exclusive lock held by the same open; everything else that overlaps conflicts
//!   (an open conflicts with its own exclusive lock, too).
//! - `offset + length` beyond 2^64 is INVALID_LOCK_RANGE.
//! - Unlock must name an existing range of the same open exactly (RANGE_NOT_LOCKED
//!   otherwise); an exclusive lock is removed before a shared one of the same range.
//! - Reads conflict with other opens' exclusive locks; writes with any other open's
//!   lock and with the open's own shared locks (FILE_LOCK_CONFLICT).

use parking_lot::Mutex;
use smbx_wire::NtStatus;
use tokio::sync::Notify;

/// Most locks one file may carry (bounded memory against hostile clients).
pub const MAX_LOCKS_PER_FILE: usize = 65_536;

/// One granted lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockEntry {
    /// Owning open (its entry id in the shared file).
    pub owner: u64,
    /// First byte.
    pub offset: u64,
    /// Length in bytes (0 allowed).
    pub length: u64,
    /// Exclusive (write) lock, else shared (read).
    pub exclusive: bool,
}

/// Range validity: `offset + length` must not exceed 2^64.
pub fn check_range(offset: u64, length: u64) -> Result<(), NtStatus> {
    if length > 0 && offset.checked_add(length - 1).is_none() {
        return Err(NtStatus::INVALID_LOCK_RANGE);
    }
    Ok(())
}

/// Do `[a, a+alen)` and `[b, b+blen)` overlap (Windows zero-length rules)?
fn overlaps(a: u64, alen: u64, b: u64, blen: u64) -> bool {
    let (a, alen, b, blen) = (a as u128, alen as u128, b as u128, blen as u128);
    if alen != 0 && a == b && alen == blen {
        return true;
    }
    !(a >= b + blen || b >= a + alen)
}

/// Would a new lock conflict with `held`?
fn conflicts(held: &LockEntry, new: &LockEntry) -> bool {
    if !held.exclusive && !new.exclusive {
        return false;
    }
    if held.exclusive && !new.exclusive && held.owner == new.owner {
        return false;
    }
    overlaps(held.offset, held.length, new.offset, new.length)
}

/// Number of LockSequence buckets of an open ([MS-SMB2] 3.3.1.10 LockSequenceArray):
/// valid LockSequenceIndex values are 1..=64.
pub const LOCK_SEQUENCE_BUCKETS: usize = 64;

/// An open's LockSequenceArray ([MS-SMB2] 3.3.5.14): per bucket, the LockSequenceNumber
/// of the last successful LOCK request that named it, so a client resending a request
/// (after a lost connection, or on another channel) does not have it applied twice.
#[derive(Debug)]
pub struct LockSequences {
    buckets: Mutex<[Option<u8>; LOCK_SEQUENCE_BUCKETS]>,
}

impl Default for LockSequences {
    fn default() -> Self {
        LockSequences {
            buckets: Mutex::new([None; LOCK_SEQUENCE_BUCKETS]),
        }
    }
}

impl LockSequences {
    /// The bucket of a LockSequenceIndex; `None` for 0 and for anything above 64
    /// (no replay detection for those).
    fn bucket(index: u32) -> Option<usize> {
        let i = usize::try_from(index).ok()?;
        (1..=LOCK_SEQUENCE_BUCKETS).contains(&i).then(|| i - 1)
    }

    /// Checks a request before it is processed: true if it repeats the last successful
    /// request of its bucket (a replay, answered SUCCESS without being applied).
    /// Otherwise the bucket is invalidated until [`LockSequences::record`] runs.
    pub fn is_replay(&self, index: u32, number: u8) -> bool {
        let Some(b) = Self::bucket(index) else {
            return false;
        };
        let mut buckets = self.buckets.lock();
        if buckets[b] == Some(number) {
            return true;
        }
        buckets[b] = None;
        false
    }

    /// Remembers a request that succeeded.
    pub fn record(&self, index: u32, number: u8) {
        if let Some(b) = Self::bucket(index) {
            self.buckets.lock()[b] = Some(number);
        }
    }
}

/// The byte-range locks of one file, with a wake-up for blocked lock requests.
#[derive(Debug, Default)]
pub struct ByteRangeLocks {
    locks: Mutex<Vec<LockEntry>>,
    changed: Notify,
}

impl ByteRangeLocks {
    /// Tries to take all `locks` (in order) for `owner`; on the first failure the ones
    /// already taken by this call are released and `(index, status)` is returned
    /// (LOCK_NOT_GRANTED for a conflict, INVALID_LOCK_RANGE, INSUFFICIENT_RESOURCES).
    pub fn try_lock_all(
        &self,
        owner: u64,
        locks: &[(u64, u64, bool)],
    ) -> Result<(), (usize, NtStatus)> {
        let mut held = self.locks.lock();
        let base = held.len();
        for (i, &(offset, length, exclusive)) in locks.iter().enumerate() {
            let fail = |held: &mut Vec<LockEntry>, st| {
                held.truncate(base);
                Err((i, st))
            };
            if let Err(st) = check_range(offset, length) {
                return fail(&mut held, st);
            }
            if held.len() >= MAX_LOCKS_PER_FILE {
                return fail(&mut held, NtStatus::INSUFFICIENT_RESOURCES);
            }
            let new = LockEntry {
                owner,
                offset,
                length,
                exclusive,
            };
            if held.iter().any(|h| conflicts(h, &new)) {
                return fail(&mut held, NtStatus::LOCK_NOT_GRANTED);
            }
            held.push(new);
        }
        Ok(())
    }

    /// Tries one lock.
    pub fn try_lock(
        &self,
        owner: u64,
        offset: u64,
        length: u64,
        exclusive: bool,
    ) -> Result<(), NtStatus> {
        self.try_lock_all(owner, &[(offset, length, exclusive)])
            .map_err(|(_, st)| st)
    }

    /// Removes one lock of `owner` with exactly this range (exclusive first); wakes
    /// blocked requests. RANGE_NOT_LOCKED if there is none.
    pub fn unlock(&self, owner: u64, offset: u64, length: u64) -> Result<(), NtStatus> {
        let mut held = self.locks.lock();
        let matching = |l: &LockEntry| l.owner == owner && l.offset == offset && l.length == length;
        let pos = held
            .iter()
            .position(|l| matching(l) && l.exclusive)
            .or_else(|| held.iter().position(matching))
            .ok_or(NtStatus::RANGE_NOT_LOCKED)?;
        held.remove(pos);
        drop(held);
        self.changed.notify_waiters();
        Ok(())
    }

    /// Drops every lock of `owner` (the open closed) and wakes blocked requests.
    pub fn release_owner(&self, owner: u64) {
        self.locks.lock().retain(|l| l.owner != owner);
        self.changed.notify_waiters();
    }

    /// Wakes blocked requests so they re-check (their open may have closed).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Waits until a lock is released or [`ByteRangeLocks::wake`] is called. Create the
    /// future (and `enable` it) before checking the condition to avoid lost wake-ups.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// May `owner` read (`write == false`) or write `[offset, offset+len)`?
    /// FILE_LOCK_CONFLICT if a lock forbids it.
    pub fn check_io(&self, owner: u64, offset: u64, len: u64, write: bool) -> Result<(), NtStatus> {
        if len == 0 {
            return Ok(());
        }
        let held = self.locks.lock();
        let blocked = held.iter().any(|l| {
            let relevant = if write {
                l.owner != owner || !l.exclusive
            } else {
                l.exclusive && l.owner != owner
            };
            relevant && l.length != 0 && overlaps(l.offset, l.length, offset, len)
        });
        if blocked {
            Err(NtStatus::FILE_LOCK_CONFLICT)
        } else {
            Ok(())
        }
    }

    /// A snapshot of the locks (tests, diagnostics).
    pub fn snapshot(&self) -> Vec<LockEntry> {
        self.locks.lock().clone()
    }
}

/// Checks a READ or WRITE of `len` bytes at `offset` through the open `entry_id` of
/// `file` against the byte-range locks of every open (FILE_LOCK_CONFLICT).
pub fn check_io(
    file: &crate::state::file::SharedFile,
    entry_id: u64,
    offset: u64,
    len: u64,
    write: bool,
) -> Result<(), NtStatus> {
    file.locks.check_io(entry_id, offset, len, write)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EX: bool = true;
    const SH: bool = false;

    #[test]
    fn lock_records_per_file_are_bounded() {
        let l = ByteRangeLocks::default();
        for i in 0..MAX_LOCKS_PER_FILE as u64 {
            l.try_lock(1, i * 2, 1, SH).unwrap();
        }
        let past = MAX_LOCKS_PER_FILE as u64 * 2;
        assert_eq!(
            l.try_lock(1, past, 1, SH),
            Err(NtStatus::INSUFFICIENT_RESOURCES)
        );
        assert_eq!(l.snapshot().len(), MAX_LOCKS_PER_FILE);
        // Another owner gets its lock once one is released.
        l.unlock(1, 0, 1).unwrap();
        l.try_lock(2, past, 1, EX).unwrap();
    }

    #[test]
    fn exclusive_conflicts_between_opens() {
        let l = ByteRangeLocks::default();
        l.try_lock(1, 100, 10, EX).unwrap();
        assert_eq!(l.try_lock(2, 105, 1, SH), Err(NtStatus::LOCK_NOT_GRANTED));
        assert_eq!(l.try_lock(1, 100, 10, EX), Err(NtStatus::LOCK_NOT_GRANTED));
        // A shared lock stacks on the owner's exclusive lock.
        l.try_lock(1, 100, 10, SH).unwrap();
        l.try_lock(2, 110, 10, EX).unwrap();
        // Exclusive is removed first, then shared, then nothing.
        l.unlock(1, 100, 10).unwrap();
        assert_eq!(l.try_lock(2, 100, 5, EX), Err(NtStatus::LOCK_NOT_GRANTED));
        l.try_lock(2, 100, 5, SH).unwrap();
        l.unlock(1, 100, 10).unwrap();
        assert_eq!(l.unlock(1, 100, 10), Err(NtStatus::RANGE_NOT_LOCKED));
        // Unlock of another open's range.
        assert_eq!(l.unlock(1, 110, 10), Err(NtStatus::RANGE_NOT_LOCKED));
    }

    #[test]
    fn zero_length_rules() {
        // Pairs from smbtorture smb2.lock.zerobytelength: (first, second, granted).
        let cases = [
            ((10, 0), (10, 0), true),
            ((10, 0), (9, 1), true),
            ((10, 0), (10, 1), true),
            ((10, 0), (11, 1), true),
            ((10, 0), (9, 2), false),
            ((10, 0), (10, 2), true),
            ((10, 0), (9, 3), false),
            ((9, 2), (10, 0), false),
            ((0, 0), (0, 0), true),
        ];
        for (owners, _) in [((1, 1), ()), ((1, 2), ())] {
            for ((o1, l1), (o2, l2), ok) in cases {
                let l = ByteRangeLocks::default();
                l.try_lock(owners.0, o1, l1, EX).unwrap();
                assert_eq!(
                    l.try_lock(owners.1, o2, l2, EX).is_ok(),
                    ok,
                    "{o1}/{l1} + {o2}/{l2}"
                );
            }
        }
    }

    #[test]
    fn range_limits() {
        let l = ByteRangeLocks::default();
        assert_eq!(
            l.try_lock(1, u64::MAX, u64::MAX, EX),
            Err(NtStatus::INVALID_LOCK_RANGE)
        );
        assert_eq!(
            l.try_lock(1, u64::MAX, 2, EX),
            Err(NtStatus::INVALID_LOCK_RANGE)
        );
        l.try_lock(1, u64::MAX, 1, EX).unwrap();
        assert_eq!(
            l.try_lock(2, u64::MAX, 1, EX),
            Err(NtStatus::LOCK_NOT_GRANTED)
        );
        l.try_lock(1, u64::MAX, 0, EX).unwrap();
        l.try_lock(2, u64::MAX, 0, EX).unwrap();
        l.try_lock(1, 1 << 63, 1, EX).unwrap();
        assert_eq!(
            l.try_lock(2, 1 << 63, 1, EX),
            Err(NtStatus::LOCK_NOT_GRANTED)
        );
    }

    #[test]
    fn multi_lock_rolls_back() {
        let l = ByteRangeLocks::default();
        l.try_lock(2, 50, 1, EX).unwrap();
        assert_eq!(
            l.try_lock_all(1, &[(0, 10, EX), (20, 10, EX), (50, 1, SH)]),
            Err((2, NtStatus::LOCK_NOT_GRANTED))
        );
        assert_eq!(l.snapshot().len(), 1);
        l.release_owner(2);
        assert!(l.snapshot().is_empty());
    }

    #[test]
    fn io_checks() {
        let l = ByteRangeLocks::default();
        l.try_lock(1, 0, 100, SH).unwrap();
        assert_eq!(
            l.check_io(1, 50, 10, true),
            Err(NtStatus::FILE_LOCK_CONFLICT)
        );
        assert_eq!(
            l.check_io(2, 50, 10, true),
            Err(NtStatus::FILE_LOCK_CONFLICT)
        );
        l.check_io(1, 50, 10, false).unwrap();
        l.check_io(2, 50, 10, false).unwrap();
        l.check_io(2, 100, 10, true).unwrap();
        l.check_io(2, 50, 0, true).unwrap();
        l.release_owner(1);
        l.try_lock(1, 0, 100, EX).unwrap();
        l.check_io(1, 50, 10, true).unwrap();
        l.check_io(1, 50, 10, false).unwrap();
        assert_eq!(
            l.check_io(2, 99, 10, false),
            Err(NtStatus::FILE_LOCK_CONFLICT)
        );
        assert_eq!(l.check_io(2, 0, 1, true), Err(NtStatus::FILE_LOCK_CONFLICT));
    }

    #[tokio::test]
    async fn unlock_wakes_waiters() {
        let l = std::sync::Arc::new(ByteRangeLocks::default());
        l.try_lock(1, 0, 10, EX).unwrap();
        let l2 = l.clone();
        let waiter = tokio::spawn(async move {
            loop {
                let n = l2.changed();
                tokio::pin!(n);
                n.as_mut().enable();
                if l2.try_lock(2, 0, 10, EX).is_ok() {
                    return;
                }
                n.await;
            }
        });
        tokio::task::yield_now().await;
        l.unlock(1, 0, 10).unwrap();
        waiter.await.unwrap();
        assert_eq!(l.snapshot()[0].owner, 2);
    }
}
