//! Credit accounting ([MS-SMBD] 3.1.5.1, 3.1.5.9).
//!
//! Each side holds *send credits* (messages it may still send; granted by
//! the peer) and owns a pool of *posted receives*, some of which it has
//! *granted* to the peer as the peer's send credits. Invariants:
//!
//! - `granted <= posted <= receive_credit_max`: a credit is only granted for
//!   a receive that is already posted (the adapter posts the receives an
//!   [`OutgoingMessage`](crate::OutgoingMessage) asks for before sending it),
//!   so a peer that respects its credits never finds an empty receive queue.
//! - Every Data Transfer message (payload or not) costs one send credit; the
//!   negotiate messages cost none.
//! - The last send credit is reserved for a message that grants credits: at
//!   one credit with nothing to grant, post one more receive to grant it, or
//!   if that is impossible (all `receive_credit_max` receives outstanding at
//!   the peer), do not send and wait for the peer.
//! - Refill: when the peer's outstanding credits (`granted`) fall to
//!   `receive_credit_target / 4` or below, post receives up to the target and
//!   grant them on the next message. A message that carries nothing but a
//!   grant is sent only in that situation, so two idle peers do not trade
//!   credit-only messages: one credit-only message costs the receiver one of
//!   its granted credits, far from its own threshold. (With a target below 4
//!   the threshold is 0 and an idle pair may still alternate; keep targets
//!   at 4 or above, as every known implementation does.)

/// Credit state of one connection.
#[derive(Debug, Clone)]
pub struct Credits {
    /// Credits we hold (messages we may still send).
    send_credits: u32,
    /// Receives posted and not yet consumed.
    posted: u32,
    /// Of those, granted to the peer and not yet consumed by it.
    granted: u32,
    /// Our ReceiveCreditMax.
    receive_credit_max: u32,
    /// min(peer's CreditsRequested, receive_credit_max).
    receive_credit_target: u32,
}

/// Most send credits a peer may give us in total; a peer granting beyond
/// this is broken or hostile.
const SEND_CREDIT_LIMIT: u32 = u16::MAX as u32;

/// The peer sent more than its credits allowed, or granted absurdly many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreditError {
    /// A message arrived while the peer held no credit.
    #[error("peer sent a message without a credit")]
    NoCredit,
    /// The peer granted more than 65535 outstanding credits.
    #[error("peer granted more than 65535 credits")]
    Overflow,
}

/// What the next Data Transfer message may carry, computed by
/// [`Credits::plan_send`] and applied by [`Credits::commit_send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendPlan {
    /// Receives to post before sending.
    pub post: u32,
    /// CreditsGranted for the message.
    pub grant: u16,
}

impl Credits {
    /// Fresh state: nothing held, nothing posted.
    pub fn new(receive_credit_max: u16) -> Self {
        Credits {
            send_credits: 0,
            posted: 0,
            granted: 0,
            receive_credit_max: u32::from(receive_credit_max),
            receive_credit_target: 0,
        }
    }

    /// Credits we hold.
    pub fn send_credits(&self) -> u32 {
        self.send_credits
    }
    /// Receives posted and not yet consumed.
    pub fn posted(&self) -> u32 {
        self.posted
    }
    /// Credits the peer holds.
    pub fn granted(&self) -> u32 {
        self.granted
    }
    /// The current receive credit target.
    pub fn receive_credit_target(&self) -> u32 {
        self.receive_credit_target
    }

    /// Records receives posted outside a message plan (negotiation).
    pub fn add_posted(&mut self, n: u32) {
        self.posted = (self.posted + n).min(self.receive_credit_max.max(1));
    }

    /// Records credits granted in the Negotiate Response (server side);
    /// they must already be posted.
    pub fn grant_posted(&mut self, n: u32) {
        self.granted = (self.granted + n).min(self.posted);
    }

    /// A negotiate message consumed a posted receive (no credit involved).
    pub fn consume_negotiate_receive(&mut self) {
        self.posted = self.posted.saturating_sub(1);
        self.granted = self.granted.min(self.posted);
    }

    /// Sets the target from the peer's CreditsRequested.
    pub fn set_receive_target(&mut self, peer_requested: u16) {
        self.receive_credit_target = u32::from(peer_requested).min(self.receive_credit_max);
    }

    /// A Data Transfer message arrived: it must have used one of the peer's
    /// credits, and it consumed one posted receive.
    pub fn on_receive(&mut self) -> Result<(), CreditError> {
        if self.granted == 0 {
            return Err(CreditError::NoCredit);
        }
        self.granted -= 1;
        self.posted -= 1;
        Ok(())
    }

    /// Adds credits the peer granted.
    pub fn on_grant(&mut self, n: u16) -> Result<(), CreditError> {
        let total = self.send_credits + u32::from(n);
        if total > SEND_CREDIT_LIMIT {
            return Err(CreditError::Overflow);
        }
        self.send_credits = total;
        Ok(())
    }

    /// Adds the credits of a Negotiate Response (client side).
    pub fn set_initial_send_credits(&mut self, n: u16) {
        self.send_credits = u32::from(n);
    }

    fn refill_threshold(&self) -> u32 {
        self.receive_credit_target / 4
    }

    /// True when the peer runs low and we could grant it more: the only
    /// situation in which a message with nothing but a grant is worth
    /// sending.
    pub fn grant_needed(&self) -> bool {
        self.granted <= self.refill_threshold()
            && self.posted.max(self.receive_credit_target) > self.granted
    }

    /// Plans the next Data Transfer message, or returns None when the
    /// credit rules forbid sending now.
    pub fn plan_send(&self) -> Option<SendPlan> {
        if self.send_credits == 0 {
            return None;
        }
        let mut post = 0;
        if self.granted <= self.refill_threshold() {
            post = self
                .receive_credit_target
                .min(self.receive_credit_max)
                .saturating_sub(self.posted);
        }
        let mut grant = self.posted + post - self.granted;
        if self.send_credits == 1 && grant == 0 {
            // The last credit must carry a grant: post one more receive.
            if self.posted + post < self.receive_credit_max {
                post += 1;
                grant = 1;
            } else {
                return None;
            }
        }
        Some(SendPlan {
            post,
            grant: grant.min(u32::from(u16::MAX)) as u16,
        })
    }

    /// Applies a plan once the message is handed to the adapter.
    pub fn commit_send(&mut self, plan: SendPlan) {
        debug_assert!(self.send_credits > 0);
        self.send_credits -= 1;
        self.posted += plan.post;
        self.granted += u32::from(plan.grant);
        debug_assert!(self.granted <= self.posted);
        debug_assert!(self.posted <= self.receive_credit_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(send: u32, posted: u32, granted: u32, target: u16) -> Credits {
        let mut c = Credits::new(255);
        c.set_receive_target(target);
        c.send_credits = send;
        c.posted = posted;
        c.granted = granted;
        c
    }

    #[test]
    fn no_credit_no_send() {
        assert_eq!(state(0, 10, 0, 255).plan_send(), None);
    }

    #[test]
    fn last_credit_needs_grant() {
        // One credit, all posted receives granted, room for one more.
        let p = state(1, 100, 100, 255).plan_send().unwrap();
        assert_eq!(p, SendPlan { post: 1, grant: 1 });
        // One credit, nothing grantable and no room to post: must wait.
        let mut c = Credits::new(4);
        c.set_receive_target(4);
        c.send_credits = 1;
        c.posted = 4;
        c.granted = 4;
        assert_eq!(c.plan_send(), None);
        // Two credits: may send without granting.
        assert_eq!(
            state(2, 100, 100, 255).plan_send(),
            Some(SendPlan { post: 0, grant: 0 })
        );
    }

    #[test]
    fn refill_at_quarter_target() {
        // 64 outstanding > 255/4 = 63: no refill.
        let c = state(10, 64, 64, 255);
        assert!(!c.grant_needed());
        assert_eq!(c.plan_send().unwrap().grant, 0);
        // 63 outstanding: refill to target.
        let c = state(10, 63, 63, 255);
        assert!(c.grant_needed());
        assert_eq!(
            c.plan_send().unwrap(),
            SendPlan {
                post: 192,
                grant: 192
            }
        );
    }

    #[test]
    fn peer_without_credit_is_violation() {
        let mut c = state(1, 5, 0, 255);
        assert_eq!(c.on_receive(), Err(CreditError::NoCredit));
        let mut c = state(1, 5, 1, 255);
        assert_eq!(c.on_receive(), Ok(()));
        assert_eq!((c.posted(), c.granted()), (4, 0));
    }

    #[test]
    fn grant_overflow() {
        let mut c = state(65_000, 0, 0, 255);
        assert_eq!(c.on_grant(535), Ok(()));
        assert_eq!(c.on_grant(1), Err(CreditError::Overflow));
    }
}
