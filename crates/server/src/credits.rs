//! The command sequence window ([MS-SMB2] 3.3.1.1, 3.3.5.2.3) and credit granting.
//!
//! Every MessageId may be used once and must lie inside the window the server has
//! granted. A request consumes `max(1, CreditCharge)` consecutive ids. The window
//! grows by the credits granted in each response, bounded so that the client never
//! holds more than `max_credits`.

use std::collections::BTreeSet;

/// Size of one credit's worth of payload for multi-credit requests.
pub const CREDIT_UNIT: usize = 65536;

/// The credit charge a payload of `len` bytes requires: `ceil(len / 64 KiB)`, at least 1.
pub fn required_charge(len: usize) -> u16 {
    len.div_ceil(CREDIT_UNIT).clamp(1, u16::MAX as usize) as u16
}

/// Why a request was refused by the sequence window (the connection should be dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditError {
    /// The MessageId (or one of the ids it charges) is outside the granted window.
    OutOfWindow,
    /// The MessageId was already used.
    Reused,
    /// CreditCharge is larger than the credits the client holds.
    ChargeTooLarge,
}

/// The per-connection sequence window.
#[derive(Debug)]
pub struct CreditWindow {
    /// Lowest id not yet consumed; everything below it has been used.
    low: u64,
    /// One past the highest id the client may use.
    high: u64,
    /// Ids at or above `low` that were already consumed (out of order).
    used: BTreeSet<u64>,
    /// Largest number of credits the client may hold.
    max_credits: u16,
}

impl CreditWindow {
    /// A fresh window: only MessageId 0 is available (for NEGOTIATE).
    pub fn new(max_credits: u16) -> Self {
        CreditWindow {
            low: 0,
            high: 1,
            used: BTreeSet::new(),
            max_credits: max_credits.max(1),
        }
    }

    /// Credits the client currently holds (ids granted but not yet consumed).
    pub fn outstanding(&self) -> u64 {
        self.high - self.low - self.used.len() as u64
    }

    /// Consumes ids `message_id .. message_id + max(charge, 1)`.
    pub fn consume(&mut self, message_id: u64, charge: u16) -> Result<(), CreditError> {
        let n = u64::from(charge.max(1));
        let end = message_id.checked_add(n).ok_or(CreditError::OutOfWindow)?;
        if n > self.outstanding() {
            return Err(CreditError::ChargeTooLarge);
        }
        if message_id < self.low || end > self.high {
            return Err(if message_id < self.low {
                CreditError::Reused
            } else {
                CreditError::OutOfWindow
            });
        }
        if self.used.range(message_id..end).next().is_some() {
            return Err(CreditError::Reused);
        }
        for id in message_id..end {
            self.used.insert(id);
        }
        while self.used.remove(&self.low) {
            self.low += 1;
        }
        Ok(())
    }

    /// Largest distance allowed between the lowest unused MessageId and the top of
    /// the window: twice the credit limit (a client may skip a MessageId and keep
    /// working with its full window, as Windows allows, but not forever).
    fn max_span(&self) -> u64 {
        2 * u64::from(self.max_credits)
    }

    /// Grants credits for a response to a request that asked for `requested` and was
    /// charged `charge`; returns the number to put in the response header.
    ///
    /// The grant is `charge + max(requested, 1) - 1`, as Samba's smbd grants: the
    /// credits the request consumed come back ([MS-SMB2] 3.3.1.2: returning the
    /// charge keeps the client level), plus what it asked for beyond the first. A
    /// multi-credit request that asked for its own charge (as most clients do) thus
    /// gets `charge - 1` credits more than it asked for, a cushion that keeps
    /// working the clients that undercount their own credits (go-smb2 spends
    /// MessageIds on CLOSE and TREE_CONNECT without counting them, and relies on
    /// this). Single-credit requests get exactly what they ask for. The grant never
    /// lets the client hold more than `max_credits`, so the cushion exists only
    /// while the client is below that limit, and a MessageId past what was really
    /// granted is still refused by [`CreditWindow::consume`].
    pub fn grant(&mut self, requested: u16, charge: u16) -> u16 {
        let want = u64::from(charge.max(1)) + u64::from(requested.max(1)) - 1;
        let held = self.outstanding();
        // Credits held, and the span of ids between the oldest unused one and the top
        // of the window (which grows while a client skips a MessageId), are both
        // bounded; the span bound keeps `used` bounded too.
        let span = self.high - self.low;
        let room = u64::from(self.max_credits)
            .saturating_sub(held)
            .min(self.max_span().saturating_sub(span));
        let mut g = want.min(room);
        if g == 0 && held == 0 {
            g = 1; // never leave the client without a credit
        }
        self.high += g;
        g as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_used_once_and_in_window() {
        let mut w = CreditWindow::new(8);
        assert_eq!(w.consume(1, 1), Err(CreditError::OutOfWindow));
        assert!(w.consume(0, 0).is_ok());
        assert_eq!(w.consume(0, 1), Err(CreditError::ChargeTooLarge));
        assert_eq!(w.grant(4, 1), 4);
        assert_eq!(w.outstanding(), 4);
        assert!(w.consume(2, 1).is_ok()); // out of order is fine
        assert_eq!(w.consume(2, 1), Err(CreditError::Reused));
        assert!(w.consume(1, 1).is_ok());
        assert_eq!(w.consume(0, 1), Err(CreditError::Reused));
        assert_eq!(w.consume(5, 1), Err(CreditError::OutOfWindow));
        assert!(w.consume(3, 2).is_ok());
        assert_eq!(w.outstanding(), 0);
    }

    #[test]
    fn grants_are_bounded() {
        let mut w = CreditWindow::new(10);
        w.consume(0, 1).unwrap();
        assert_eq!(w.grant(100, 1), 10);
        assert_eq!(w.outstanding(), 10);
        w.consume(1, 1).unwrap();
        assert_eq!(w.grant(100, 1), 1);
        // A client holding none always gets one.
        let mut z = CreditWindow::new(1);
        z.consume(0, 1).unwrap();
        assert_eq!(z.grant(0, 1), 1);
    }

    #[test]
    fn multi_credit_requests_get_a_cushion_up_to_the_limit() {
        let mut w = CreditWindow::new(100);
        w.consume(0, 1).unwrap();
        // Single-credit requests get what they ask for, no more.
        assert_eq!(w.grant(8, 1), 8);
        assert_eq!(w.grant(0, 0), 1);
        assert_eq!(w.outstanding(), 9);
        // A 4-credit request (ids 1..=4) asking for its charge: 4 back plus 3.
        w.consume(1, 4).unwrap();
        assert_eq!(w.outstanding(), 5);
        assert_eq!(w.grant(4, 4), 7);
        assert_eq!(w.outstanding(), 12);
        // Asking for more than the charge: charge + requested - 1.
        w.consume(5, 2).unwrap();
        assert_eq!(w.grant(6, 2), 7);
        // Asking for less than the charge: the charge comes back.
        w.consume(7, 3).unwrap();
        assert_eq!(w.grant(1, 3), 3);
        assert_eq!(w.outstanding(), 17);

        // Near the limit the cushion shrinks to what is left below it.
        let mut n = CreditWindow::new(10);
        n.consume(0, 1).unwrap();
        assert_eq!(n.grant(8, 1), 8);
        n.consume(1, 4).unwrap();
        assert_eq!(n.grant(4, 4), 6); // 4 + 3 wanted, 10 - 4 held allowed
        assert_eq!(n.outstanding(), 10);
        n.consume(5, 8).unwrap();
        assert_eq!(n.grant(8, 8), 8); // at the limit: the charge back, no cushion
        assert_eq!(n.outstanding(), 10);
    }

    #[test]
    fn ids_past_granted_and_cushion_are_refused() {
        let mut w = CreditWindow::new(100);
        w.consume(0, 1).unwrap();
        assert_eq!(w.grant(4, 1), 4); // ids 1..=4
        w.consume(1, 2).unwrap();
        // Ids 5..=7: the charge of 2 back plus a cushion of 1.
        assert_eq!(w.grant(2, 2), 3);
        // Ids 3..=7 are the client's; 8 was never granted.
        assert_eq!(w.consume(8, 1), Err(CreditError::OutOfWindow));
        assert_eq!(w.consume(7, 2), Err(CreditError::OutOfWindow));
        assert_eq!(w.consume(3, 6), Err(CreditError::ChargeTooLarge));
        w.consume(3, 5).unwrap();
        assert_eq!(w.outstanding(), 0);
        assert_eq!(w.consume(8, 1), Err(CreditError::ChargeTooLarge));
        // A client far past its window is refused however much it was given.
        let mut full = CreditWindow::new(8192);
        full.consume(0, 1).unwrap();
        assert_eq!(full.grant(u16::MAX, 1), 8192);
        assert_eq!(full.consume(8193, 1), Err(CreditError::OutOfWindow));
        assert_eq!(full.consume(1_000_000, 1), Err(CreditError::OutOfWindow));
        assert!(full.consume(8192, 1).is_ok());
    }

    #[test]
    fn charge_for_payload() {
        assert_eq!(required_charge(0), 1);
        assert_eq!(required_charge(65536), 1);
        assert_eq!(required_charge(65537), 2);
        assert_eq!(required_charge(8 << 20), 128);
        assert!(CreditWindow::new(4).consume(u64::MAX, 2).is_err());
    }

    #[test]
    fn skipped_message_id_bounds_the_window() {
        let mut w = CreditWindow::new(4);
        w.consume(0, 1).unwrap();
        // Ids 1..=4 granted; skip id 1, keep using the rest and asking for more.
        assert_eq!(w.grant(4, 1), 4);
        let mut granted = 0;
        for next in 2..22 {
            if w.consume(next, 1).is_err() {
                break;
            }
            granted += u64::from(w.grant(1, 1));
        }
        // The span from the skipped id 1 never exceeds 2 × 4.
        assert!(w.high - w.low <= 8, "span {}", w.high - w.low);
        assert!(w.used.len() <= 8);
        assert!(granted >= 3);
        // Using the skipped id releases the window again.
        w.consume(1, 1).unwrap();
        assert!(w.grant(8, 1) > 0);
        assert!(w.high - w.low <= 8);
    }
}
