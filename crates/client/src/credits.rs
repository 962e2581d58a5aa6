//! Credit arithmetic ([MS-SMB2] 3.2.4.1.5): how many credits a request costs and how many
//! to ask for. The window itself (credits granted, spent, and the senders waiting for
//! them) lives in [`crate::request_core`].

/// The payload size one credit pays for with large MTU.
pub const CREDIT_UNIT: usize = 65536;

/// Largest number of credits asked for in one request beyond its own charge.
const MAX_EXTRA_REQUEST: usize = 512;

/// The CreditCharge of a request moving `payload` bytes (the larger of what it sends and
/// what it may receive): ceil(payload / 64 KiB), at least 1. Without large MTU every
/// request costs one credit.
pub fn charge_for(payload: usize, large_mtu: bool) -> u16 {
    if !large_mtu {
        return 1;
    }
    payload.div_ceil(CREDIT_UNIT).clamp(1, u16::MAX as usize) as u16
}

/// The CreditRequest to put on a request costing `charge`: its own charge back plus enough
/// to grow the window (credits held + credits in flight) towards `target`.
pub fn credit_request(charge: u16, held: usize, in_flight: usize, target: u16) -> u16 {
    let window = held.saturating_add(in_flight);
    let want = (target as usize)
        .saturating_sub(window)
        .min(MAX_EXTRA_REQUEST);
    (charge as usize + want).min(u16::MAX as usize) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges() {
        assert_eq!(charge_for(0, true), 1);
        assert_eq!(charge_for(1, true), 1);
        assert_eq!(charge_for(65536, true), 1);
        assert_eq!(charge_for(65537, true), 2);
        assert_eq!(charge_for(1 << 20, true), 16);
        assert_eq!(charge_for(8 << 20, true), 128);
        assert_eq!(charge_for(1 << 20, false), 1);
    }

    #[test]
    fn requests_grow_towards_target_only() {
        assert_eq!(credit_request(1, 0, 1, 256), 256);
        assert_eq!(credit_request(16, 100, 16, 64), 16);
        assert_eq!(credit_request(1, 0, 0, 4096), 1 + 512);
        assert_eq!(credit_request(4, 1000, 24, 1024), 4);
    }
}
