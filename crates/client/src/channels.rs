//! Multichannel: a session's channels (connections bound to it), which of the
//! server's interfaces to bind ([`plan`]), and where each request goes
//! ([`ChannelSet::pick`]: the live channel with the fewest outstanding bytes per
//! unit of link speed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use smbx_wire::ioctl::{IfAddr, NetworkInterface, NETWORK_IF_RDMA_CAPABLE, NETWORK_IF_RSS_CAPABLE};

use crate::breaks::EventSink;
use crate::client::Client;
use crate::conn::SessionSecurity;

/// Link speed assumed for a channel whose interface the server did not list (bit/s).
const UNKNOWN_SPEED: u64 = 1_000_000_000;

/// The connection a channel runs over now, and its protection (its own signing
/// key, the session's sealing keys). Replaced when the channel is re-established.
#[derive(Clone)]
pub(crate) struct Link {
    /// The connection (its own credits, MessageIds, pending table).
    pub client: Client,
    /// The channel's signer and the session's sealing keys.
    pub security: Arc<SessionSecurity>,
}

impl Link {
    /// True if `other` is this same connection.
    pub(crate) fn same(&self, other: &Link) -> bool {
        Arc::ptr_eq(&self.client.inner, &other.client.inner)
    }
}

/// One channel of a session: a negotiated connection bound to it (replaced by
/// a new one when it fails and its address answers again) and what it carried.
pub(crate) struct Channel {
    link: RwLock<Link>,
    /// The server address the connection goes to.
    pub addr: Option<SocketAddr>,
    /// Advertised link speed of the server interface (bit/s).
    speed: AtomicU64,
    /// Bytes of requests and expected responses now in flight.
    outstanding: AtomicU64,
    requests: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    /// Requests this channel carried again after the channel they were first
    /// sent on failed (or the server asked for a replay).
    replayed: AtomicU64,
    /// Times the channel was re-established after failing.
    reconnects: AtomicU64,
    /// WRITE data the server RDMA-Read from buffers registered with this
    /// channel's link, and READ data it RDMA-Wrote into them.
    rdma_sent: AtomicU64,
    rdma_received: AtomicU64,
    /// Set from the failure until a new connection is bound in its place.
    down: AtomicBool,
    /// One of this channel's connections was SMB Direct: set before such a
    /// link is put in place, never cleared (see [`ChannelSet::any_direct`]).
    was_direct: AtomicBool,
}

impl Channel {
    pub(crate) fn new(link: Link, addr: Option<SocketAddr>, speed: u64) -> Channel {
        let was_direct = link.client.connection().direct().is_some();
        Channel {
            link: RwLock::new(link),
            addr,
            speed: AtomicU64::new(if speed == 0 { UNKNOWN_SPEED } else { speed }),
            outstanding: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            replayed: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            rdma_sent: AtomicU64::new(0),
            rdma_received: AtomicU64::new(0),
            down: AtomicBool::new(false),
            was_direct: AtomicBool::new(was_direct),
        }
    }

    /// The connection the channel runs over now.
    pub(crate) fn link(&self) -> Link {
        self.link.read().expect("channel lock").clone()
    }

    /// Counts a request of `bytes` (sent plus expected back) as outstanding until
    /// the returned guard drops.
    pub(crate) fn start(self: &Arc<Self>, bytes: u64) -> InFlight {
        self.outstanding.fetch_add(bytes, Ordering::Relaxed);
        InFlight {
            channel: self.clone(),
            bytes,
        }
    }

    /// Sets the link speed (bit/s) once the server's interface list names it.
    pub(crate) fn set_speed(&self, speed: u64) {
        if speed > 0 {
            self.speed.store(speed, Ordering::Relaxed);
        }
    }

    /// Records one finished request: what it sent and what came back, and
    /// whether it was a replay of a request first sent elsewhere.
    pub(crate) fn record(&self, sent: u64, received: u64, replay: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_sent.fetch_add(sent, Ordering::Relaxed);
        self.bytes_received.fetch_add(received, Ordering::Relaxed);
        if replay {
            self.replayed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records `bytes` of a READ (`read`) or WRITE moved by RDMA through a
    /// descriptor registered with this channel's link.
    pub(crate) fn record_rdma(&self, read: bool, bytes: u64) {
        let c = if read {
            &self.rdma_received
        } else {
            &self.rdma_sent
        };
        c.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Marks `failed` (this channel's connection as a caller saw it) as dead:
    /// its requests fail (their callers replay them), but its socket stays
    /// open until a new connection replaces it ([`Channel::restore`]), so the
    /// server does not drop the session if this was its last live channel.
    /// True for the first caller to report this connection's failure (who then
    /// advances the session's ChannelSequence and starts the re-establishment);
    /// false if it was already reported or replaced.
    pub(crate) fn fail(&self, failed: &Link) -> bool {
        let now = self.link();
        if !now.same(failed) {
            return false;
        }
        now.client
            .connection()
            .fail_requests(crate::error::DisconnectReason::ChannelUnresponsive);
        !self.down.swap(true, Ordering::AcqRel)
    }

    /// Puts a newly bound connection in place of the failed one, and closes
    /// the failed one.
    pub(crate) fn restore(&self, link: Link) {
        if link.client.connection().direct().is_some() {
            self.was_direct.store(true, Ordering::Release);
        }
        let old = std::mem::replace(&mut *self.link.write().expect("channel lock"), link);
        old.client.connection().close();
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        self.down.store(false, Ordering::Release);
    }

    /// The largest READ (`read`) or WRITE this channel's connection carries:
    /// its negotiated MaxReadSize / MaxWriteSize and, over SMB Direct, what
    /// one transfer moves there — the peer's MaxReadWriteSize by RDMA (`rdma`),
    /// else one reassembled message inline ([`Channel::inline_limit`]).
    pub(crate) fn max_io(&self, read: bool, rdma: bool) -> u32 {
        let link = self.link();
        let n = &link.client.inner.negotiated;
        let mut max = if read { n.max_read } else { n.max_write };
        if let Some(d) = link.client.connection().direct() {
            let p = d.params();
            max = max.min(if rdma {
                p.max_read_write_size
            } else {
                inline_limit(&p, read)
            });
        }
        max
    }

    /// The largest READ (`read`) or WRITE that fits this channel inline: over
    /// SMB Direct one reassembled message (the peer's fragmented size) less
    /// room for headers; no limit over TCP.
    pub(crate) fn inline_max(&self, read: bool) -> Option<u32> {
        let link = self.link();
        let d = link.client.connection().direct()?;
        Some(inline_limit(&d.params(), read))
    }

    pub(crate) fn is_live(&self) -> bool {
        !self.down.load(Ordering::Acquire) && !self.link().client.connection().is_closed()
    }

    /// Outstanding bytes scaled by link speed: lower has more room.
    fn load(&self, extra: u64) -> u128 {
        let out = self
            .outstanding
            .load(Ordering::Relaxed)
            .saturating_add(extra) as u128;
        // Bytes per Mbit/s of link: a link ten times faster takes ten times the bytes.
        out * 1_000_000 / (self.speed.load(Ordering::Relaxed).max(1) as u128)
    }

    fn stats(&self) -> ChannelStats {
        ChannelStats {
            addr: self.addr,
            link_speed: self.speed.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            replayed: self.replayed.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            rdma_sent: self.rdma_sent.load(Ordering::Relaxed),
            rdma_received: self.rdma_received.load(Ordering::Relaxed),
            live: self.is_live(),
        }
    }
}

/// Room left for SMB2 headers (and a transform header) when an inline READ or
/// WRITE must fit one SMB Direct message.
pub(crate) const INLINE_HEADROOM: u32 = 1024;

/// The largest READ (`read`: its response) or WRITE carried inline over an
/// SMB Direct link with `p`: one reassembled message less [`INLINE_HEADROOM`].
pub(crate) fn inline_limit(p: &smbx_transport::NegotiatedParams, read: bool) -> u32 {
    if read {
        p.max_fragmented_receive_size
    } else {
        p.max_fragmented_send_size
    }
    .saturating_sub(INLINE_HEADROOM)
}

/// A channel a request must go on, and the connection it must use: a READ or
/// WRITE whose buffer is registered with that connection's SMB Direct link
/// (its descriptor means nothing to another connection).
#[derive(Clone)]
pub(crate) struct Pinned {
    /// The channel (its load and stats).
    pub channel: Arc<Channel>,
    /// Its connection when the buffer was registered.
    pub link: Link,
    /// That connection's SMB Direct link.
    pub direct: Arc<dyn smbx_transport::DirectLink>,
    /// Sent with SMB2_FLAGS_REPLAY_OPERATION: a retry after the channel the
    /// request was first sent on failed.
    pub replay: bool,
}

/// A request's bytes counted as outstanding on its channel until dropped.
pub(crate) struct InFlight {
    channel: Arc<Channel>,
    bytes: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.channel
            .outstanding
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// What one channel has carried (for reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelStats {
    /// The server address of the channel's connection, when known.
    pub addr: Option<SocketAddr>,
    /// The advertised link speed of the server interface (bit/s).
    pub link_speed: u64,
    /// Requests (compounds count once) that completed on the channel.
    pub requests: u64,
    /// Bytes of requests sent (bodies after the SMB2 header).
    pub bytes_sent: u64,
    /// Bytes of responses received (whole messages).
    pub bytes_received: u64,
    /// Requests (compounds count once) the channel carried again, with
    /// SMB2_FLAGS_REPLAY_OPERATION, after the channel they were first sent on
    /// failed or the server answered STATUS_FILE_NOT_AVAILABLE.
    pub replayed: u64,
    /// Times the channel was re-established (bound again) after it failed.
    pub reconnects: u64,
    /// WRITE data moved by RDMA (the server read it from buffers registered
    /// with this channel's SMB Direct link), not counted in `bytes_sent`.
    pub rdma_sent: u64,
    /// READ data moved by RDMA (the server wrote it into buffers registered
    /// with this channel's link), not counted in `bytes_received`.
    pub rdma_received: u64,
    /// False while the channel is down (failed and not yet re-established).
    pub live: bool,
}

/// The channels of one session; the first is the connection it logged on over.
pub(crate) struct ChannelSet {
    list: RwLock<Vec<Arc<Channel>>>,
    /// Session.ChannelSequence ([MS-SMB2] 3.2.4.1): advanced at each channel
    /// failure, sent in every 3.x request of the session.
    sequence: AtomicU16,
    /// Where every channel's oplock and lease breaks go: the sink of the
    /// client the session logged on with.
    sink: Arc<EventSink>,
    /// Set once the server refused to bind a channel because it no longer
    /// knows the session: no channel can come back.
    gone: AtomicBool,
}

impl ChannelSet {
    pub(crate) fn new(first: Channel) -> ChannelSet {
        let client = first.link().client;
        let set = ChannelSet {
            list: RwLock::new(vec![Arc::new(first)]),
            sequence: AtomicU16::new(0),
            sink: client.sink(),
            gone: AtomicBool::new(false),
        };
        // The first session on a connection starts its pump; later ones find
        // it running into the same sink.
        set.forward_events(&client);
        set
    }

    /// The channel the session was established on.
    pub(crate) fn first(&self) -> Arc<Channel> {
        self.list.read().expect("channels lock")[0].clone()
    }

    pub(crate) fn push(&self, ch: Channel) {
        self.list.write().expect("channels lock").push(Arc::new(ch));
    }

    pub(crate) fn len(&self) -> usize {
        self.list.read().expect("channels lock").len()
    }

    /// False when no channel of the session has ever been SMB Direct: then
    /// no READ or WRITE can move by RDMA, and asking which channel would carry
    /// one (its link, its connection) can be skipped. Never false while a
    /// channel's link is SMB Direct (it may stay true after one was).
    pub(crate) fn any_direct(&self) -> bool {
        self.list
            .read()
            .expect("channels lock")
            .iter()
            .any(|c| c.was_direct.load(Ordering::Acquire))
    }

    /// Every channel, the first first.
    pub(crate) fn all(&self) -> Vec<Arc<Channel>> {
        self.list.read().expect("channels lock").clone()
    }

    /// The ChannelSequence requests carry now.
    pub(crate) fn sequence(&self) -> u16 {
        self.sequence.load(Ordering::Acquire)
    }

    /// Advances the ChannelSequence (a channel failed).
    /// Starts the session's ChannelSequence at `n`: a session that replaces
    /// a lost one continues its count (its reclaimed opens remember it).
    pub(crate) fn set_sequence(&self, n: u16) {
        self.sequence.store(n, Ordering::Release);
    }

    pub(crate) fn advance_sequence(&self) {
        self.sequence.fetch_add(1, Ordering::AcqRel);
    }

    /// Sends `client`'s unsolicited messages (a channel's oplock and lease
    /// breaks) to the session's [`EventSink`], until that channel's connection
    /// goes away.
    pub(crate) fn forward_events(&self, client: &Client) {
        if let Some(rx) = client.connection().take_events() {
            self.sink.pump(rx);
        }
    }

    /// The server addresses channels already go to.
    pub(crate) fn addrs(&self) -> Vec<SocketAddr> {
        let list = self.list.read().expect("channels lock");
        list.iter().filter_map(|c| c.addr).collect()
    }

    /// Records that the server no longer knows the session (it refused a
    /// binding with USER_SESSION_DELETED or NETWORK_SESSION_EXPIRED).
    pub(crate) fn mark_session_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// True once [`ChannelSet::mark_session_gone`] was called.
    pub(crate) fn session_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// True if some channel is live.
    pub(crate) fn any_live(&self) -> bool {
        let list = self.list.read().expect("channels lock");
        list.iter().any(|c| c.is_live())
    }

    /// The live channel with the most room for a request of `bytes`: least
    /// outstanding bytes per unit of link speed (ties go to the earlier
    /// channel). The first channel when none is live (its error is the one the
    /// caller sees).
    pub(crate) fn pick(&self, bytes: u64) -> Arc<Channel> {
        let list = self.list.read().expect("channels lock");
        list.iter()
            .filter(|c| c.is_live())
            .min_by_key(|c| c.load(bytes))
            .unwrap_or(&list[0])
            .clone()
    }

    /// As [`ChannelSet::pick`], among the live channels that carry a READ
    /// (`read`) or WRITE of `io` bytes inline (an SMB Direct channel's
    /// messages are bounded); any live channel when none does.
    pub(crate) fn pick_inline(&self, bytes: u64, io: u64, read: bool) -> Arc<Channel> {
        let fitting = {
            let list = self.list.read().expect("channels lock");
            list.iter()
                .filter(|c| c.is_live())
                .filter(|c| c.inline_max(read).is_none_or(|m| u64::from(m) >= io))
                .min_by_key(|c| c.load(bytes))
                .cloned()
        };
        fitting.unwrap_or_else(|| self.pick(bytes))
    }

    /// The largest READ (`read`) or WRITE every channel of the session
    /// carries ([`Channel::max_io`]; by RDMA where `rdma` and the channel is
    /// SMB Direct): a piece of that size goes, or is replayed, on any of them.
    pub(crate) fn max_io(&self, read: bool, rdma: bool) -> u32 {
        let list = self.list.read().expect("channels lock");
        list.iter()
            .map(|c| c.max_io(read, rdma))
            .min()
            .unwrap_or(u32::MAX)
    }

    /// The channel with the most room for a READ or WRITE of `bytes`
    /// ([`ChannelSet::pick`]) pinned with its link at this moment, if that
    /// channel is SMB Direct (its data can then move by RDMA there); None for
    /// a TCP channel (the request goes inline).
    pub(crate) fn pick_direct(&self, bytes: u64) -> Option<Pinned> {
        let channel = self.pick(bytes);
        let link = channel.link();
        let direct = link.client.connection().direct()?.clone();
        Some(Pinned {
            channel,
            link,
            direct,
            replay: false,
        })
    }

    pub(crate) fn stats(&self) -> Vec<ChannelStats> {
        let list = self.list.read().expect("channels lock");
        list.iter().map(|c| c.stats()).collect()
    }
}

/// The socket address of an interface entry on `port` (IPv6 with its scope).
pub fn interface_addr(ni: &NetworkInterface, port: u16) -> SocketAddr {
    match ni.addr {
        IfAddr::V4(a) => SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), port),
        IfAddr::V6(a, scope) => SocketAddr::V6(std::net::SocketAddrV6::new(
            Ipv6Addr::from(a),
            port,
            0,
            scope,
        )),
    }
}

/// True if a client could try to connect to this address at all.
fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_multicast() || a.is_broadcast()),
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast()),
    }
}

/// The server's interfaces in the order Windows prefers them: RDMA-capable
/// first, then RSS-capable, then by link speed (fastest first); the server's
/// own order breaks ties.
pub fn rank_interfaces(ifs: &[NetworkInterface]) -> Vec<NetworkInterface> {
    let mut v: Vec<NetworkInterface> = ifs.to_vec();
    v.sort_by_key(|ni| {
        (
            ni.capability & NETWORK_IF_RDMA_CAPABLE == 0,
            ni.capability & NETWORK_IF_RSS_CAPABLE == 0,
            std::cmp::Reverse(ni.link_speed),
        )
    });
    v
}

/// Which addresses to bind `want` more channels to, best first: each ranked
/// interface not already used (`used`), then further connections to
/// RSS-capable interfaces (Windows opens several per RSS interface), round
/// robin, until `want` are planned. Unusable addresses (unspecified, multicast)
/// are left out. Each entry is the address and its interface's link speed.
pub fn plan(
    ifs: &[NetworkInterface],
    port: u16,
    used: &[SocketAddr],
    want: usize,
) -> Vec<(SocketAddr, u64)> {
    let mut ranked: Vec<(SocketAddr, NetworkInterface)> = Vec::new();
    for ni in rank_interfaces(ifs) {
        let sa = interface_addr(&ni, port);
        // The same address listed twice counts once.
        if usable(sa.ip()) && !ranked.iter().any(|(a, _)| *a == sa) {
            ranked.push((sa, ni));
        }
    }
    let mut out: Vec<(SocketAddr, u64)> = Vec::new();
    for (sa, ni) in &ranked {
        if out.len() >= want {
            return out;
        }
        if !used.contains(sa) {
            out.push((*sa, ni.link_speed));
        }
    }
    let rss: Vec<&(SocketAddr, NetworkInterface)> = ranked
        .iter()
        .filter(|(_, ni)| ni.capability & NETWORK_IF_RSS_CAPABLE != 0)
        .collect();
    // Bounded: `want` more entries at most.
    for (sa, ni) in rss
        .iter()
        .cycle()
        .take(if rss.is_empty() { 0 } else { want })
    {
        if out.len() >= want {
            break;
        }
        out.push((*sa, ni.link_speed));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ni(last: u8, capability: u32, gbit: u64) -> NetworkInterface {
        NetworkInterface {
            if_index: last as u32,
            capability,
            link_speed: gbit * 1_000_000_000,
            addr: IfAddr::V4([10, 0, 0, last]),
        }
    }

    fn sa(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], 445))
    }

    #[test]
    fn ranking_is_rdma_then_rss_then_speed() {
        let ifs = [
            ni(1, 0, 100),
            ni(2, NETWORK_IF_RSS_CAPABLE, 1),
            ni(3, NETWORK_IF_RDMA_CAPABLE, 10),
            ni(4, NETWORK_IF_RSS_CAPABLE, 25),
            ni(5, 0, 40),
        ];
        let order: Vec<u32> = rank_interfaces(&ifs).iter().map(|n| n.if_index).collect();
        assert_eq!(order, vec![3, 4, 2, 1, 5]);
    }

    #[test]
    fn plan_skips_used_and_unusable_and_stops_at_want() {
        let mut ifs = vec![ni(1, 0, 10), ni(2, 0, 1), ni(3, 0, 5)];
        ifs.push(NetworkInterface {
            addr: IfAddr::V4([0, 0, 0, 0]),
            ..ni(9, NETWORK_IF_RDMA_CAPABLE, 100)
        });
        let p = plan(&ifs, 445, &[sa(1)], 5);
        assert_eq!(
            p,
            vec![(sa(3), 5_000_000_000), (sa(2), 1_000_000_000)],
            "no RSS interface: one channel per address"
        );
        assert_eq!(plan(&ifs, 445, &[sa(1)], 1), vec![(sa(3), 5_000_000_000)]);
        assert!(plan(&ifs, 445, &[sa(1)], 0).is_empty());
        assert!(plan(&[], 445, &[], 3).is_empty());
    }

    #[test]
    fn plan_adds_connections_to_rss_interfaces() {
        let ifs = [ni(1, NETWORK_IF_RSS_CAPABLE, 10), ni(2, 0, 10)];
        let p = plan(&ifs, 445, &[sa(1)], 3);
        assert_eq!(
            p.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            vec![sa(2), sa(1), sa(1)]
        );
    }

    #[test]
    fn ipv6_scope_survives() {
        let n = NetworkInterface {
            addr: IfAddr::V6([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 7),
            ..ni(1, 0, 1)
        };
        match interface_addr(&n, 445) {
            SocketAddr::V6(v6) => assert_eq!((v6.scope_id(), v6.port()), (7, 445)),
            other => panic!("{other}"),
        }
    }
}
