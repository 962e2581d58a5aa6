//! One open named pipe: reassembles incoming PDUs, runs calls, queues response PDUs.

use std::collections::VecDeque;

use crate::interfaces::{Interface, BTFN_PREFIX, NDR_UUID, NDR_VERSION};
use crate::pdu::{self, Bind, ContextResult, Header, SyntaxId};
use crate::{srvsvc, wkssvc, PipeContext, RpcError};

/// Largest reassembled request stub we accept.
const MAX_REQUEST: usize = 1 << 20;
/// Largest amount of unread response data before writes are refused.
const MAX_PENDING: usize = 8 << 20;
/// Association group id handed to clients that ask for a new one.
const ASSOC_GROUP: u32 = 0x0000_53f0;
/// Bind time features we acknowledge: keep connection on orphan (0x2). Security context
/// multiplexing (0x1) is meaningless without authentication.
const SUPPORTED_FEATURES: u16 = 0x0002;

/// A request whose later fragments are still arriving.
#[derive(Debug)]
struct PartialCall {
    call_id: u32,
    context_id: u16,
    opnum: u16,
    stub: Vec<u8>,
    /// Set when the call already failed (e.g. too large); remaining fragments are dropped.
    failed: bool,
}

/// A DCE/RPC server endpoint on one open pipe handle.
///
/// Output is message-oriented like a Windows message-mode pipe: every queued PDU is one
/// message, and [`Pipe::read`] never returns bytes from two PDUs at once.
#[derive(Debug)]
pub struct Pipe {
    iface: Interface,
    ctx: PipeContext,
    inbuf: Vec<u8>,
    out: VecDeque<Vec<u8>>,
    out_off: usize,
    pending: usize,
    bound: bool,
    max_frag: u16,
    assoc_group: u32,
    contexts: Vec<u16>,
    partial: Option<PartialCall>,
    broken: bool,
}

impl Pipe {
    /// Opens the pipe `name` (see [`crate::is_known_pipe`]); `None` for unknown pipes.
    pub fn open(name: &str, ctx: PipeContext) -> Option<Pipe> {
        Some(Pipe {
            iface: Interface::for_pipe(name)?,
            ctx,
            inbuf: Vec::new(),
            out: VecDeque::new(),
            out_off: 0,
            pending: 0,
            bound: false,
            max_frag: pdu::MAX_FRAG,
            assoc_group: 0,
            contexts: Vec::new(),
            partial: None,
            broken: false,
        })
    }

    /// Feeds bytes the client wrote (an SMB2 WRITE or the input of FSCTL_PIPE_TRANSCEIVE).
    /// `data` may hold part of a PDU or several; responses are queued for [`Pipe::read`].
    ///
    /// Returns the number of bytes consumed (always `data.len()`), or an error when the
    /// stream is not DCE/RPC; the pipe is unusable afterwards and should be closed.
    pub fn write(&mut self, data: &[u8]) -> Result<usize, RpcError> {
        if self.broken {
            return Err(RpcError::Broken);
        }
        if self.pending > MAX_PENDING {
            return Err(RpcError::QueueFull);
        }
        self.inbuf.extend_from_slice(data);
        let r = self.process();
        if r.is_err() {
            self.broken = true;
            self.inbuf.clear();
        }
        r.map(|()| data.len())
    }

    /// Takes up to `max` bytes of the next response message. The flag is true when that
    /// message has more bytes left (the server answers STATUS_BUFFER_OVERFLOW). Further
    /// queued messages are reported by [`Pipe::pending`].
    pub fn read(&mut self, max: usize) -> (Vec<u8>, bool) {
        let Some(msg) = self.out.front() else {
            return (Vec::new(), false);
        };
        let rest = msg.get(self.out_off..).unwrap_or_default();
        let take = rest.len().min(max);
        let bytes = rest.get(..take).unwrap_or_default().to_vec();
        let more = take < rest.len();
        self.pending -= take;
        if more {
            self.out_off += take;
        } else {
            self.out.pop_front();
            self.out_off = 0;
        }
        (bytes, more)
    }

    /// Bytes of response data waiting to be read.
    pub fn pending(&self) -> usize {
        self.pending
    }

    fn push(&mut self, pdu: Vec<u8>) {
        self.pending += pdu.len();
        self.out.push_back(pdu);
    }

    fn process(&mut self) -> Result<(), RpcError> {
        let mut off = 0usize;
        let result = loop {
            let rest = self.inbuf.get(off..).unwrap_or_default();
            if rest.len() < pdu::HEADER_LEN {
                break Ok(());
            }
            let hdr = match Header::parse(rest) {
                Ok(h) => h,
                Err(e) => break Err(e),
            };
            let len = usize::from(hdr.frag_len);
            let Some(frame) = rest.get(..len) else {
                break Ok(());
            };
            let frame = frame.to_vec();
            off += len;
            if let Err(e) = self.handle(&hdr, &frame) {
                break Err(e);
            }
        };
        self.inbuf.drain(..off.min(self.inbuf.len()));
        result
    }

    fn handle(&mut self, hdr: &Header, frame: &[u8]) -> Result<(), RpcError> {
        match hdr.ptype {
            pdu::PTYPE_BIND | pdu::PTYPE_ALTER_CONTEXT => {
                self.on_bind(hdr, frame);
                Ok(())
            }
            pdu::PTYPE_REQUEST => {
                self.on_request(hdr, frame);
                Ok(())
            }
            pdu::PTYPE_CO_CANCEL | pdu::PTYPE_AUTH3 => Ok(()),
            pdu::PTYPE_ORPHANED => {
                if self.partial.as_ref().map(|p| p.call_id) == Some(hdr.call_id) {
                    self.partial = None;
                }
                Ok(())
            }
            other => Err(RpcError::UnexpectedPdu(other)),
        }
    }

    fn on_bind(&mut self, hdr: &Header, frame: &[u8]) {
        let is_bind = hdr.ptype == pdu::PTYPE_BIND;
        let nak = |reason| {
            if is_bind {
                pdu::bind_nak(hdr.call_id, reason)
            } else {
                pdu::fault(hdr.call_id, 0, pdu::NCA_PROTO_ERROR, true)
            }
        };
        if !hdr.supported_drep() {
            self.push(nak(pdu::NAK_REASON_NOT_SPECIFIED));
            return;
        }
        if hdr.auth_len != 0 {
            self.push(nak(pdu::NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED));
            return;
        }
        if is_bind == self.bound {
            // A second bind, or alter_context before any bind.
            self.push(nak(pdu::NAK_REASON_NOT_SPECIFIED));
            return;
        }
        let Ok(bind) = Bind::parse(frame) else {
            self.push(nak(pdu::NAK_REASON_NOT_SPECIFIED));
            return;
        };
        if is_bind && bind.contexts.is_empty() {
            self.push(nak(pdu::NAK_REASON_NOT_SPECIFIED));
            return;
        }
        let (major, minor) = self.iface.version();
        let ours = self.iface.uuid();
        let mut results = Vec::with_capacity(bind.contexts.len());
        let mut negotiated = false;
        for c in &bind.contexts {
            let btfn = c
                .transfer_syntaxes
                .iter()
                .find(|t| t.uuid[..8] == BTFN_PREFIX);
            if let (Some(t), false) = (btfn, negotiated) {
                negotiated = true;
                let offered = u16::from(t.uuid[8]);
                results.push(ContextResult::negotiate_ack(offered & SUPPORTED_FEATURES));
                continue;
            }
            let v = c.abstract_syntax.version;
            let (cmaj, cmin) = ((v & 0xffff) as u16, (v >> 16) as u16);
            if c.abstract_syntax.uuid != ours || cmaj != major || cmin > minor {
                results.push(ContextResult::reject(
                    pdu::REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED,
                ));
                continue;
            }
            let ndr = SyntaxId {
                uuid: NDR_UUID,
                version: NDR_VERSION,
            };
            if c.transfer_syntaxes.contains(&ndr) {
                if !self.contexts.contains(&c.id) {
                    self.contexts.push(c.id);
                }
                results.push(ContextResult::accept(ndr));
            } else {
                results.push(ContextResult::reject(
                    pdu::REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED,
                ));
            }
        }
        let sec_addr;
        if is_bind {
            self.bound = true;
            self.max_frag = bind.max_recv_frag.clamp(pdu::MIN_FRAG, pdu::MAX_FRAG);
            self.assoc_group = if bind.assoc_group_id != 0 {
                bind.assoc_group_id
            } else {
                ASSOC_GROUP
            };
            sec_addr = format!("\\PIPE\\{}", self.iface.pipe_name());
        } else {
            sec_addr = String::new();
        }
        let ptype = if is_bind {
            pdu::PTYPE_BIND_ACK
        } else {
            pdu::PTYPE_ALTER_CONTEXT_RESP
        };
        self.push(pdu::bind_ack(
            ptype,
            hdr.call_id,
            self.max_frag,
            self.assoc_group,
            &sec_addr,
            &results,
        ));
    }

    fn on_request(&mut self, hdr: &Header, frame: &[u8]) {
        let call_id = hdr.call_id;
        let ctx_id = frame
            .get(20..22)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .unwrap_or(0);
        let fault = |status, dne| pdu::fault(call_id, ctx_id, status, dne);
        if !hdr.supported_drep() {
            self.partial = None;
            self.push(fault(pdu::NCA_S_UNSUPPORTED_TYPE, true));
            return;
        }
        if hdr.auth_len != 0 {
            self.partial = None;
            self.push(fault(pdu::NCA_S_FAULT_ACCESS_DENIED, true));
            return;
        }
        let mut body_off = pdu::REQUEST_HEADER_LEN;
        if hdr.flags & pdu::PFC_OBJECT_UUID != 0 {
            body_off += 16;
        }
        let (Some(fixed), Some(body)) = (frame.get(16..24), frame.get(body_off..)) else {
            self.partial = None;
            self.push(fault(pdu::NCA_PROTO_ERROR, true));
            return;
        };
        let opnum = u16::from_le_bytes([fixed[6], fixed[7]]);
        let first = hdr.flags & pdu::PFC_FIRST_FRAG != 0;
        let last = hdr.flags & pdu::PFC_LAST_FRAG != 0;

        let mut call = if first {
            if self.partial.take().is_some() {
                // A new call started before the previous one finished.
                self.push(fault(pdu::NCA_PROTO_ERROR, true));
                return;
            }
            PartialCall {
                call_id,
                context_id: ctx_id,
                opnum,
                stub: Vec::new(),
                failed: false,
            }
        } else {
            match self.partial.take() {
                Some(p) if p.call_id == call_id => p,
                _ => {
                    self.push(fault(pdu::NCA_PROTO_ERROR, true));
                    return;
                }
            }
        };
        if !call.failed {
            if call.stub.len().saturating_add(body.len()) > MAX_REQUEST {
                call.failed = true;
                call.stub = Vec::new();
                self.push(fault(pdu::NCA_PROTO_ERROR, true));
            } else {
                call.stub.extend_from_slice(body);
            }
        }
        if !last {
            self.partial = Some(call);
            return;
        }
        if call.failed {
            return;
        }
        self.run_call(call);
    }

    fn run_call(&mut self, call: PartialCall) {
        let fault = |status, dne| pdu::fault(call.call_id, call.context_id, status, dne);
        if !self.bound {
            self.push(fault(pdu::NCA_PROTO_ERROR, true));
            return;
        }
        if !self.contexts.contains(&call.context_id) {
            self.push(fault(pdu::NCA_UNK_IF, true));
            return;
        }
        let result = match self.iface {
            Interface::Srvsvc => srvsvc::dispatch(&self.ctx, call.opnum, &call.stub),
            Interface::Wkssvc => wkssvc::dispatch(&self.ctx, call.opnum, &call.stub),
            Interface::Lsarpc => Err(pdu::NCA_OP_RNG_ERROR),
        };
        match result {
            Ok(stub) => {
                for p in pdu::responses(call.call_id, call.context_id, &stub, self.max_frag) {
                    self.push(p);
                }
            }
            Err(status) => {
                let dne = status != pdu::NCA_S_FAULT_NDR;
                self.push(fault(status, dne));
            }
        }
    }
}
