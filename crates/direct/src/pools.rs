//! How many receive buffers, send buffers and RDMA work requests one
//! connection uses, from the configuration and what the device granted its
//! queue pair ([`smbx_rdma::Granted`]): the receive credits a connection
//! offers never exceed the receives the queue pair can hold, and sends,
//! receives and RDMA Reads/Writes together never exceed its work queues or the
//! device's largest memory region. Sans-IO: a pure function of its inputs.

use smbx_rdma::{Granted, QpCaps};

use crate::config::Config;

/// Send buffers (messages in flight at the provider) when nothing limits them.
pub const SEND_SLOTS: u32 = 256;
/// RDMA Read/Write work requests one transfer keeps in flight, at most.
pub const RDMA_WINDOW: u32 = 64;
/// Send queue entries kept apart from data messages and RDMA work requests
/// (control messages, invalidations).
pub const SEND_RESERVE: u32 = 16;
/// The fewest send buffers a connection works with.
const MIN_SEND_SLOTS: u32 = 2;
/// The fewest receives: one credit and the reserved last credit.
const MIN_RECV_SLOTS: u32 = 2;

/// The sizes one connection uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pools {
    /// Registered send buffers of `max_send_size` bytes.
    pub send_slots: u32,
    /// Registered receive buffers of `max_receive_size` bytes (receive credits
    /// offered: one fewer).
    pub recv_slots: u32,
    /// RDMA Read/Write work requests in flight per transfer.
    pub rdma_window: u32,
    /// The receive credits the connection offers (`recv_slots - 1`, at most
    /// the configured `receive_credit_max`).
    pub receive_credit_max: u16,
    /// Sends up to this many bytes go inline (copied into the work request).
    pub max_inline: u32,
}

/// Why no pool fits the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The queue pair's work queues are too short for SMB Direct.
    #[error("the device granted {send} send and {recv} receive work requests; SMB Direct needs at least {min_send} and {min_recv}")]
    QueuesTooShort {
        /// Send work requests granted.
        send: u32,
        /// Receive work requests granted.
        recv: u32,
        /// The fewest send work requests that work.
        min_send: u32,
        /// The fewest receives that work.
        min_recv: u32,
    },
    /// The device's largest memory region cannot hold two buffers.
    #[error(
        "the device registers at most {max_mr_size} bytes per region; SMB Direct needs {need}"
    )]
    RegionTooSmall {
        /// The device's maximum.
        max_mr_size: u64,
        /// What two buffers need.
        need: u64,
    },
}

/// The queue pair sizes to ask a provider for with `config` (a device may grant less;
/// [`size`] then fits the pools into what it granted).
pub fn wanted_caps(config: &Config) -> QpCaps {
    QpCaps {
        max_send_wr: SEND_SLOTS + RDMA_WINDOW + SEND_RESERVE,
        max_recv_wr: u32::from(config.receive_credit_max) + 1,
        max_send_sge: 1,
        max_recv_sge: 1,
    }
}

/// Sizes the pools of one connection from `config` and what the device
/// granted its queue pair (`None`: the provider has no fixed limits, so
/// [`SEND_SLOTS`], [`RDMA_WINDOW`] and `receive_credit_max + 1` receives).
///
/// The receives fill at most the receive queue and one region; the send queue
/// is split between RDMA work requests (a quarter, at most [`RDMA_WINDOW`]),
/// [`SEND_RESERVE`] entries and send buffers (at most [`SEND_SLOTS`], and no
/// more than one region holds).
pub fn size(config: &Config, granted: Option<&Granted>) -> Result<Pools, PoolError> {
    let wanted_recv = u32::from(config.receive_credit_max) + 1;
    let Some(g) = granted else {
        return Ok(Pools {
            send_slots: SEND_SLOTS,
            recv_slots: wanted_recv,
            rdma_window: RDMA_WINDOW,
            receive_credit_max: config.receive_credit_max,
            max_inline: 0,
        });
    };
    let send_wr = g.caps.max_send_wr;
    let recv_wr = g.caps.max_recv_wr;
    let min_send = MIN_SEND_SLOTS + 1 + SEND_RESERVE;
    if send_wr < min_send || recv_wr < MIN_RECV_SLOTS {
        return Err(PoolError::QueuesTooShort {
            send: send_wr,
            recv: recv_wr,
            min_send,
            min_recv: MIN_RECV_SLOTS,
        });
    }
    // How many buffers of `each` bytes one region holds.
    let per_region = |each: u32| -> u32 {
        let n = g.max_mr_size / u64::from(each.max(1));
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    let recv_slots = wanted_recv
        .min(recv_wr)
        .min(per_region(config.max_receive_size));
    let rdma_window = RDMA_WINDOW.min((send_wr - SEND_RESERVE) / 4).max(1);
    let send_slots = SEND_SLOTS
        .min(send_wr - SEND_RESERVE - rdma_window)
        .min(per_region(config.max_send_size.max(32)));
    if recv_slots < MIN_RECV_SLOTS || send_slots < MIN_SEND_SLOTS {
        return Err(PoolError::RegionTooSmall {
            max_mr_size: g.max_mr_size,
            need: 2 * u64::from(config.max_receive_size.max(config.max_send_size)),
        });
    }
    Ok(Pools {
        send_slots,
        recv_slots,
        rdma_window,
        receive_credit_max: u16::try_from(recv_slots - 1).unwrap_or(u16::MAX),
        max_inline: g.max_inline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(send: u32, recv: u32, max_mr_size: u64) -> Granted {
        Granted {
            caps: QpCaps {
                max_send_wr: send,
                max_recv_wr: recv,
                max_send_sge: 1,
                max_recv_sge: 1,
            },
            max_inline: 256,
            max_mr_size,
        }
    }

    /// Without device limits (soft-iWARP) the pools are the fixed defaults.
    #[test]
    fn no_limits_keeps_the_defaults() {
        let c = Config::default();
        let p = size(&c, None).unwrap();
        assert_eq!(
            p,
            Pools {
                send_slots: SEND_SLOTS,
                recv_slots: u32::from(c.receive_credit_max) + 1,
                rdma_window: RDMA_WINDOW,
                receive_credit_max: c.receive_credit_max,
                max_inline: 0,
            }
        );
    }

    /// A device that grants all that was asked gives the same pools, and its
    /// inline size.
    #[test]
    fn a_roomy_device_grants_the_defaults() {
        let c = Config::default();
        let w = wanted_caps(&c);
        let p = size(&c, Some(&granted(w.max_send_wr, w.max_recv_wr, 1 << 40))).unwrap();
        assert_eq!((p.send_slots, p.recv_slots), (SEND_SLOTS, 256));
        assert_eq!((p.rdma_window, p.receive_credit_max), (RDMA_WINDOW, 255));
        assert_eq!(p.max_inline, 256);
    }

    /// Short work queues shrink every pool so that sends, RDMA work requests
    /// and the reserve fit the send queue, and the credits offered fit the
    /// receive queue.
    #[test]
    fn short_queues_shrink_the_pools_and_the_credits() {
        let c = Config::default();
        let p = size(&c, Some(&granted(128, 64, 1 << 40))).unwrap();
        assert_eq!(p.recv_slots, 64);
        assert_eq!(p.receive_credit_max, 63);
        assert_eq!(p.rdma_window, (128 - SEND_RESERVE) / 4);
        assert!(p.send_slots + p.rdma_window + SEND_RESERVE <= 128, "{p:?}");
        assert_eq!(p.send_slots, 128 - SEND_RESERVE - p.rdma_window);
    }

    /// A small largest region bounds the buffers one region holds.
    #[test]
    fn the_largest_region_bounds_the_buffers() {
        let c = Config::default();
        let mr = 16 * u64::from(c.max_receive_size);
        let p = size(&c, Some(&granted(1024, 1024, mr))).unwrap();
        assert_eq!(p.recv_slots, 16);
        assert_eq!(p.receive_credit_max, 15);
        assert!(u64::from(p.send_slots) * u64::from(c.max_send_size) <= mr);
    }

    /// Queues or regions too small for SMB Direct are refused, saying why.
    #[test]
    fn too_small_is_an_error() {
        let c = Config::default();
        assert!(matches!(
            size(&c, Some(&granted(8, 64, 1 << 40))),
            Err(PoolError::QueuesTooShort { send: 8, .. })
        ));
        assert!(matches!(
            size(&c, Some(&granted(512, 1, 1 << 40))),
            Err(PoolError::QueuesTooShort { recv: 1, .. })
        ));
        assert!(matches!(
            size(&c, Some(&granted(512, 512, 100))),
            Err(PoolError::RegionTooSmall { .. })
        ));
    }
}
