//! `smbx status`: who is connected and what they hold, as tables in the manner of
//! Samba's smbstatus, or the server's JSON (`--json`; field names in README
//! "Status").

use smbx_server::control::{Request, Response, Status};

use crate::args::StatusArgs;
use crate::control;
use crate::error::{other, CliError};

/// Prints the running server's status.
pub fn run(args: &StatusArgs) -> Result<(), CliError> {
    let Response::Status(st) = control::ask(&args.control, &Request::Status)? else {
        return Err(other("unexpected answer from the server"));
    };
    if args.json {
        let text = serde_json::to_string_pretty(&st).map_err(|e| other(e.to_string()))?;
        println!("{text}");
    } else {
        print!("{}", render(&st));
    }
    Ok(())
}

/// Columns padded to their widest cell.
struct Table {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(head: &[&'static str]) -> Table {
        Table {
            head: head.to_vec(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self, out: &mut String) {
        let mut w: Vec<usize> = self.head.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if let Some(x) = w.get_mut(i) {
                    *x = (*x).max(c.chars().count());
                }
            }
        }
        let line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    let pad = w[i].saturating_sub(c.chars().count()) + 2;
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        out.push_str(&line(self.head.clone()));
        out.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1)));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
        }
        out.push('\n');
    }
}

fn or_dash(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// The human form: server line, sessions with their channels, tree connects,
/// opens, locks, totals.
fn render(st: &Status) -> String {
    let mut o = format!(
        "smbx {} (pid {}), {} (configuration generation {})\n\n",
        st.server.version,
        st.server.pid,
        st.server
            .config_file
            .as_deref()
            .unwrap_or("zero configuration"),
        st.server.config_generation
    );
    let mut t = Table::new(&[
        "Session",
        "User",
        "Client",
        "Dialect",
        "Signing",
        "Encryption",
        "Channels",
    ]);
    for s in &st.sessions {
        let user = if s.anonymous {
            "(anonymous)".to_string()
        } else if s.guest {
            format!("{} (guest)", s.user)
        } else if s.domain.is_empty() {
            s.user.clone()
        } else {
            format!("{}\\{}", s.domain, s.user)
        };
        let signing = match (&s.signing.algorithm, s.signing.required) {
            (Some(a), true) => format!("{a} (required)"),
            (a, _) => or_dash(a.as_deref()),
        };
        let encryption = match (&s.encryption.cipher, s.encryption.active) {
            (Some(c), true) => c.clone(),
            _ => "-".into(),
        };
        let channels = s
            .channels
            .iter()
            .map(|c| format!("{} {}->{}", c.transport, c.client, c.local))
            .collect::<Vec<_>>()
            .join(", ");
        t.row(vec![
            format!("{:#x}", s.session_id),
            user,
            s.client.clone(),
            s.dialect.clone(),
            signing,
            encryption,
            channels,
        ]);
    }
    t.render(&mut o);

    let mut t = Table::new(&["Share", "Session", "Tree", "Client", "Encrypted", "Path"]);
    for tr in &st.trees {
        let share = if tr.share_removed {
            format!("{} (removed)", tr.share)
        } else {
            tr.share.clone()
        };
        t.row(vec![
            share,
            format!("{:#x}", tr.session_id),
            tr.tree_id.to_string(),
            tr.client.clone(),
            if tr.encrypted { "yes" } else { "no" }.into(),
            tr.path.clone(),
        ]);
    }
    t.render(&mut o);

    let mut t = Table::new(&[
        "Session", "Share", "Access", "Mask", "Sharing", "Oplock", "Durable", "Path",
    ]);
    for op in &st.opens {
        let oplock = match &op.lease {
            Some(l) => format!(
                "LEASE({}){}",
                l.state,
                if l.breaking { " breaking" } else { "" }
            ),
            None => op.oplock.to_uppercase(),
        };
        let durable = match &op.durable {
            Some(d) => format!("v{} {}ms", d.version, d.timeout_ms),
            None => "no".into(),
        };
        t.row(vec![
            format!("{:#x}", op.session_id),
            op.share.clone(),
            op.access.clone(),
            format!("{:#010x}", op.access_mask),
            op.share_access.clone(),
            oplock,
            durable,
            if op.directory {
                format!("{}\\", op.path)
            } else {
                op.path.clone()
            },
        ]);
    }
    t.render(&mut o);

    if !st.locks.is_empty() {
        let mut t = Table::new(&["Session", "Share", "Kind", "Offset", "Length", "Path"]);
        for l in &st.locks {
            t.row(vec![
                format!("{:#x}", l.session_id),
                l.share.clone(),
                l.kind.clone(),
                l.offset.to_string(),
                l.length.to_string(),
                l.path.clone(),
            ]);
        }
        t.render(&mut o);
    }
    let n = &st.totals;
    o.push_str(&format!(
        "{} connection(s), {} session(s), {} channel(s), {} tree connect(s), {} open(s) \
         ({} durable awaiting reconnect), {} lock(s)\n",
        n.connections,
        n.sessions,
        n.channels,
        n.trees,
        n.opens,
        n.disconnected_durable_opens,
        n.locks
    ));
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbx_server::control::status::{ChannelStatus, SessionStatus, Totals};

    #[test]
    fn renders_a_session_with_its_channels() {
        let st = Status {
            sessions: vec![SessionStatus {
                session_id: 0x1234,
                user: "alice".into(),
                client: "127.0.0.1:5000".into(),
                dialect: "3.1.1".into(),
                channels: vec![ChannelStatus {
                    connection_id: 1,
                    transport: "smbdirect".into(),
                    local: "127.0.0.1:5445".into(),
                    client: "127.0.0.1:5000".into(),
                }],
                ..Default::default()
            }],
            totals: Totals {
                sessions: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let s = render(&st);
        assert!(s.contains("0x1234"), "{s}");
        assert!(
            s.contains("smbdirect 127.0.0.1:5000->127.0.0.1:5445"),
            "{s}"
        );
        assert!(s.contains("1 session(s)"), "{s}");
    }
}
