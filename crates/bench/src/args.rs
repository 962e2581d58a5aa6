//! The diskspd-style command line: `-b4K -o32 -t2 -r -w30 -d10 TARGET...`.
//!
//! Values are glued to their flag, as in diskspd. Sizes take K, M, G or T (powers of 1024)
//! or `b` (multiples of the block size). A flag may appear once; contradictory flags are
//! refused with a message naming both.

use std::collections::HashSet;

use crate::profile::{
    Access, Engine, Format, Profile, Protection, Throttle, WriteBuffer, MAX_OUTSTANDING,
};

/// A command-line error, with a message for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError(msg.into()))
}

/// The usage text for `smbx bench --help`.
pub const USAGE: &str = "\
usage: smbx bench [flags] TARGET...
       smbx bench sweep -b<list> -o<list> -t<list> [flags] --out DIR TARGET...
                 (a matrix of runs with CSV, JSON and SVG charts; smbx bench sweep --help)
  TARGET         a local file path or smb://[user[:password]@]host[:port]/share/path
                 (password from SMBX_PASSWORD when not in the URL)
  -b<size>       bytes per I/O (default 64K); sizes take K/M/G/T, or b = blocks
  -o<n>          outstanding I/Os per thread per target, 1..1024 (default 2)
  -t<n>          threads per target (default 1)
  -F<n>          fixed total threads, each driving every target (conflicts with -t)
  -r[align]      random offsets aligned to align (default: block size)
  -s[i][stride]  sequential (default); i = threads share one offset per target
  -T<size>       offset between successive threads' starting points (sequential)
  -w<pct>        percentage of writes, 0..100 (default 0)
  -d<s>          measured duration (default 10)
  -W<s>          warm-up (default 5)
  -C<s>          cool-down (default 0)
  -L             latency statistics (always collected; accepted for diskspd)
  -D[ms]         IOPS sampling interval (default 1000)
  -c<size>       create each target first, filled with random data
  -Z | -Zr | -Z<size>  write data: zeros | random per I/O | from a random buffer
  -z[seed]       random seed (plain -z: from the clock; default 0)
  -S[b|u|w|h]    caching: u = no page cache (O_DIRECT), w = write-through (O_DSYNC),
                 h = both, b = buffered (default); plain -S = -Su
  -g<n>[i]       throttle per thread per target: n bytes/ms, or n I/Os per second with i
  -B<base>[:len] use the region of each target starting at base (len bytes)
  -f<len>        use only the first len bytes after the base
  -R<text|json|xml>  report format (default text)
  --progress     progress line each second on stderr (default: when stderr is a terminal)
  --server-pid <pid>  also report the CPU time of this process (and its children)
  --ios <n>      each thread issues at most n I/Os per target (warm-up included), then the
                 run ends once they complete (or at -d): a fixed amount of work
  --os-threads <n>  OS threads that run the threads when every target is smb:// (default:
                 one per thread up to the cores, else the most that fit the cores and
                 deal the threads evenly); each thread keeps its own connection, -o
                 and figures
  --shared-connection  the threads an OS thread runs share one connection, session and
                 tree per smb:// target, each with its own open of the file (as a kernel
                 client's threads share its connection; with --os-threads 1 all do)
  --affinity <cpus>  pin the OS threads round-robin over these CPUs (e.g. 1 | 0,1 | 2-5;
                 diskspd -a, fio cpus_allowed; default: not pinned)
  --transport tcp|rdma  smb:// targets over Direct TCP or SMB Direct (soft-iWARP, port 5445)
  --spin-us <n>  a lone request waits for its response (Direct TCP or SMB Direct) by
                 spinning up to n microseconds (the thread yields and polls) before it sleeps
                 (default 100; 0 = never spin: less CPU, a wake-up per round trip)
  --socket-options <list>  socket options of every smb:// connection, as smb.conf's
                 `socket options` (e.g. SO_RCVBUF=4194304,TCP_NODELAY); an option smbx
                 does not apply is an error
  --rdma-threshold <n>  over SMB Direct, READs/WRITEs larger than n bytes move by RDMA (4K; soft-iWARP 16K/32K)
  --multichannel <n>    smb:// targets bind up to n channels to their session (1..32)
  --sign[=gmac|cmac]    smb:// targets sign every message (SMB 3.1.1; default AES-GMAC)
  --seal[=aes-128-gcm|aes-128-ccm|aes-256-gcm|aes-256-ccm]
                        smb:// targets encrypt every message (default AES-128-GCM)
  --engine <auto|uring|psync>  how local files are driven (default auto)
  --kerberos            smb:// targets log on with Kerberos from the credential cache
                        (KRB5CCNAME; the URL needs no user or password; -k is diskspd's)
";

/// A size as written: bytes, or a count of blocks (`b` suffix) resolved once `-b` is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    Bytes(u64),
    Blocks(u64),
}

impl Size {
    fn resolve(self, block: u64, flag: &str) -> Result<u64, ArgError> {
        match self {
            Size::Bytes(b) => Ok(b),
            Size::Blocks(n) => n
                .checked_mul(block)
                .ok_or_else(|| ArgError(format!("{flag}: size overflows"))),
        }
    }
}

/// Parses a size: digits with an optional K/M/G/T suffix (powers of 1024) or `b` (blocks).
fn parse_size(s: &str, flag: &str) -> Result<Size, ArgError> {
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, suffix) = s.split_at(digits_end);
    if num.is_empty() {
        return err(format!(
            "{flag}: expected a size such as 4K, 1M or 8b, got {s:?}"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| ArgError(format!("{flag}: {num:?} is too large")))?;
    let mult: u64 = match suffix {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        "b" => return Ok(Size::Blocks(n)),
        _ => {
            return err(format!(
                "{flag}: unknown size suffix {suffix:?} (use K, M, G, T or b)"
            ))
        }
    };
    n.checked_mul(mult)
        .map(Size::Bytes)
        .ok_or_else(|| ArgError(format!("{flag}: {s} is too large")))
}

fn parse_u64(s: &str, flag: &str, what: &str) -> Result<u64, ArgError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return err(format!("{flag}: expected {what}, got {s:?}"));
    }
    s.parse()
        .map_err(|_| ArgError(format!("{flag}: {s:?} is too large")))
}

/// Flags as seen, before sizes in blocks are resolved and cross-checks run.
#[derive(Default)]
struct Raw {
    block: Option<Size>,
    random: Option<Option<Size>>,
    sequential: Option<(bool, Option<Size>)>,
    thread_stride: Option<Size>,
    create: Option<Size>,
    zbuf: Option<RawZ>,
    base: Option<(Size, Option<Size>)>,
    max_len: Option<Size>,
    caching: Option<(bool, bool, bool)>,
}

enum RawZ {
    Zero,
    PerIo,
    Buffer(Size),
}

/// The long options that take no value after them (`--sign` and `--seal` take theirs glued
/// only, `--sign=cmac`); every other long option takes one, glued or next.
pub(crate) const LONG_WITHOUT_VALUE: &[&str] =
    &["progress", "kerberos", "shared-connection", "sign", "seal"];

/// Parses `smbx bench` arguments (without the program and subcommand names).
pub fn parse(args: &[String]) -> Result<Profile, ArgError> {
    let mut p = Profile::default();
    let mut raw = Raw::default();
    let mut seen: HashSet<String> = HashSet::new();
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if !seen.insert(format!("--{name}")) {
                return err(format!("--{name} given twice"));
            }
            let mut value = |what: &str| -> Result<String, ArgError> {
                match &inline {
                    Some(v) => Ok(v.clone()),
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| ArgError(format!("--{name} needs {what}"))),
                }
            };
            match name {
                "progress" if inline.is_none() => p.progress = true,
                "kerberos" if inline.is_none() => p.kerberos = true,
                "shared-connection" if inline.is_none() => p.shared_connection = true,
                "server-pid" => {
                    let v = value("a process id")?;
                    let pid = parse_u64(&v, "--server-pid", "a process id")?;
                    p.server_pid = Some(
                        u32::try_from(pid)
                            .map_err(|_| ArgError(format!("--server-pid: {pid} is too large")))?,
                    );
                }
                "ios" => {
                    let n = parse_u64(&value("an I/O count")?, "--ios", "an I/O count")?;
                    if n == 0 {
                        return err("--ios: the count must be at least 1");
                    }
                    p.max_ios = Some(n);
                }
                "os-threads" => {
                    let n = parse_u64(&value("a thread count")?, "--os-threads", "a thread count")?;
                    match u32::try_from(n) {
                        Ok(n @ 1..) => p.os_threads = Some(n),
                        _ => return err("--os-threads: the count must be at least 1"),
                    }
                }
                "affinity" => {
                    let v = value("a CPU list")?;
                    let cpus = crate::affinity::parse_cpu_list(&v)
                        .map_err(|e| ArgError(format!("--affinity: {e}")))?;
                    p.affinity = Some(cpus);
                }
                "engine" => {
                    p.engine = match value("auto, uring or psync")?.as_str() {
                        "auto" => Engine::Auto,
                        "uring" | "io_uring" => Engine::Uring,
                        "psync" => Engine::Psync,
                        other => {
                            return err(format!(
                                "--engine: {other:?} is not one of auto, uring, psync"
                            ))
                        }
                    }
                }
                "transport" => {
                    let v = value("tcp or rdma")?;
                    p.transport = Some(smbx_client::Transport::parse(&v).ok_or_else(|| {
                        ArgError(format!("--transport: {v:?} is not one of tcp, rdma"))
                    })?);
                }
                "sign" | "seal" => {
                    let v = inline.as_deref();
                    let got = if name == "sign" {
                        Protection::sign(v)
                    } else {
                        Protection::seal(v)
                    };
                    if p.protection != Protection::Default {
                        return err("--sign and --seal: give one of them, once".to_string());
                    }
                    p.protection = got.ok_or_else(|| {
                        ArgError(format!(
                            "--{name}: {:?} is not known (see smbx bench --help)",
                            v.unwrap_or("")
                        ))
                    })?;
                }
                "multichannel" => {
                    let v = value("a channel count")?;
                    let n = parse_u64(&v, "--multichannel", "a channel count")?;
                    if !(1..=32).contains(&n) {
                        return err(format!("--multichannel: {n} is outside 1..32"));
                    }
                    p.multichannel = Some(n as usize);
                }
                "socket-options" => {
                    let v = value("a socket option list")?;
                    let (_, refused) = smbx_client::SocketOptions::parse(&v);
                    if let Some(r) = refused.first() {
                        return err(format!("--socket-options: {r}"));
                    }
                    p.socket_options = Some(v);
                }
                "spin-us" => {
                    let n = parse_u64(&value("microseconds")?, "--spin-us", "microseconds")?;
                    p.spin_us = Some(n);
                }
                "rdma-threshold" => {
                    let v = value("a size")?;
                    p.rdma_threshold = Some(parse_u64(&v, "--rdma-threshold", "a size")? as usize);
                }
                _ => return err(format!("unknown option {arg:?} (see smbx bench --help)")),
            }
            continue;
        }
        let Some(body) = arg.strip_prefix('-').filter(|b| !b.is_empty()) else {
            p.targets.push(arg.clone());
            continue;
        };
        let mut chars = body.chars();
        let letter = chars.next().unwrap_or('-');
        let v = chars.as_str();
        let flag = format!("-{letter}");
        // -Sh is the same setting as -h; treat them as one flag for duplicate detection.
        let key = if letter == 'h' {
            "-S".to_string()
        } else {
            flag.clone()
        };
        if !seen.insert(key) {
            return err(format!("{flag} given twice"));
        }
        let no_value = |v: &str| -> Result<(), ArgError> {
            if v.is_empty() {
                Ok(())
            } else {
                err(format!("{flag} takes no value, got {arg:?}"))
            }
        };
        match letter {
            'b' => raw.block = Some(parse_size(v, &flag)?),
            'o' => {
                let n = parse_u64(v, &flag, "a count of outstanding I/Os")?;
                if n == 0 || n > u64::from(MAX_OUTSTANDING) {
                    return err(format!("-o: {n} is outside 1..{MAX_OUTSTANDING}"));
                }
                p.outstanding = n as u32;
            }
            't' | 'F' => {
                let n = parse_u64(v, &flag, "a thread count")?;
                if n == 0 || n > 4096 {
                    return err(format!("{flag}: {n} threads is outside 1..4096"));
                }
                if letter == 't' {
                    p.threads_per_target = n as u32;
                } else {
                    p.total_threads = Some(n as u32);
                }
            }
            'r' => {
                raw.random = Some(if v.is_empty() {
                    None
                } else {
                    Some(parse_size(v, &flag)?)
                })
            }
            's' => {
                let (interlocked, rest) = match v.strip_prefix('i') {
                    Some(r) => (true, r),
                    None => (false, v),
                };
                let stride = if rest.is_empty() {
                    None
                } else {
                    Some(parse_size(rest, &flag)?)
                };
                raw.sequential = Some((interlocked, stride));
            }
            'T' => raw.thread_stride = Some(parse_size(v, &flag)?),
            'w' => {
                let n = parse_u64(v, &flag, "a write percentage 0..100")?;
                if n > 100 {
                    return err(format!("-w: {n}% is more than 100%"));
                }
                p.write_percent = n as u8;
            }
            'd' | 'W' | 'C' => {
                let n = parse_u64(v, &flag, "seconds")?;
                if n > 366 * 86_400 {
                    return err(format!("{flag}: {n} seconds is too long"));
                }
                match letter {
                    'd' if n == 0 => return err("-d: the duration must be at least 1 second"),
                    'd' => p.duration_s = n,
                    'W' => p.warmup_s = n,
                    _ => p.cooldown_s = n,
                }
            }
            'L' => {
                no_value(v)?;
                p.latency_flag = true;
            }
            'D' => {
                if !v.is_empty() {
                    let n = parse_u64(v, &flag, "milliseconds")?;
                    if n == 0 {
                        return err("-D: the interval must be at least 1 ms");
                    }
                    p.iops_interval_ms = n;
                }
            }
            'c' => raw.create = Some(parse_size(v, &flag)?),
            'Z' => {
                raw.zbuf = Some(match v {
                    "" => RawZ::Zero,
                    "r" => RawZ::PerIo,
                    _ => RawZ::Buffer(parse_size(v, &flag)?),
                })
            }
            'z' => {
                p.seed = if v.is_empty() {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_nanos() as u64)
                        .unwrap_or(1)
                } else {
                    parse_u64(v, &flag, "a seed")?
                }
            }
            'S' | 'h' => {
                if letter == 'h' {
                    no_value(v)?;
                }
                let letters = if letter == 'h' {
                    "h"
                } else if v.is_empty() {
                    "u"
                } else {
                    v
                };
                let (mut buffered, mut nocache, mut wt) = (false, false, false);
                for c in letters.chars() {
                    match c {
                        'b' => buffered = true,
                        'u' => nocache = true,
                        'w' => wt = true,
                        'h' => {
                            nocache = true;
                            wt = true
                        }
                        _ => {
                            return err(format!(
                                "-S: unknown caching mode {c:?} in {arg:?} (use b, u, w or h)"
                            ))
                        }
                    }
                }
                if buffered && (nocache || wt) {
                    return err(format!(
                        "{arg}: b (buffered) contradicts u/w/h (unbuffered, write-through)"
                    ));
                }
                raw.caching = Some((buffered, nocache, wt));
            }
            'g' => {
                let (num, iops) = match v.strip_suffix('i') {
                    Some(n) => (n, true),
                    None => (v, false),
                };
                let n = parse_u64(num, &flag, "a rate (bytes per ms, or I/Os per s with i)")?;
                if n == 0 {
                    return err("-g: the rate must be positive");
                }
                p.throttle = Some(if iops {
                    Throttle::Iops(n)
                } else {
                    Throttle::BytesPerMs(n)
                });
            }
            'R' => {
                let name = if v.is_empty() {
                    match it.peek().map(|s| s.as_str()) {
                        Some(n @ ("text" | "json" | "xml")) => {
                            it.next();
                            n.to_string()
                        }
                        _ => return err("-R needs a format: -Rtext, -Rjson or -Rxml"),
                    }
                } else {
                    v.to_string()
                };
                p.format = match name.as_str() {
                    "text" => Format::Text,
                    "json" => Format::Json,
                    "xml" => Format::Xml,
                    _ => return err(format!("-R: unknown format {name:?} (text, json or xml)")),
                };
            }
            'B' => {
                let (b, l) = match v.split_once(':') {
                    Some((b, l)) => (b, Some(parse_size(l, &flag)?)),
                    None => (v, None),
                };
                raw.base = Some((parse_size(b, &flag)?, l));
            }
            'f' => raw.max_len = Some(parse_size(v, &flag)?),
            '?' => return err(USAGE),
            'a' | 'n' | 'l' | 'x' | 'j' | 'p' | 'P' | 'e' | 'v' | 'I' | 'X' | 'i' | 'N' | 'O'
            | 'k' | 'K' | 'M' | 'u' | 'U' | 'y' | 'Y' => {
                return err(format!(
                    "{flag} is a diskspd flag smbx bench does not support (see --help)"
                ))
            }
            _ => return err(format!("unknown flag {arg:?} (see smbx bench --help)")),
        }
    }
    finish(p, raw, &seen)
}

fn finish(mut p: Profile, raw: Raw, seen: &HashSet<String>) -> Result<Profile, ArgError> {
    if p.targets.is_empty() {
        return err("no target given: name a file path or an smb:// URL");
    }
    if seen.contains("-t") && seen.contains("-F") {
        return err("-t (threads per target) and -F (total threads) contradict each other");
    }
    let block = match raw.block {
        Some(Size::Blocks(_)) => return err("-b: the block size cannot be given in blocks"),
        Some(Size::Bytes(b)) => b,
        None => p.block_size,
    };
    if block == 0 {
        return err("-b: the block size must be positive");
    }
    if block > 1 << 30 {
        return err("-b: the block size must be at most 1G");
    }
    p.block_size = block;
    p.access = match (raw.random, raw.sequential) {
        (Some(_), Some(_)) => return err("-r (random) and -s (sequential) contradict each other"),
        (Some(a), None) => {
            let align = a.map(|s| s.resolve(block, "-r")).transpose()?;
            let align = align.unwrap_or(block);
            if align == 0 {
                return err("-r: the alignment must be positive");
            }
            Access::Random { align }
        }
        (None, s) => {
            let (interlocked, stride) = s.unwrap_or((false, None));
            let stride = stride.map(|s| s.resolve(block, "-s")).transpose()?;
            let stride = stride.unwrap_or(block);
            if stride == 0 {
                return err("-s: the stride must be positive");
            }
            Access::Sequential {
                stride,
                interlocked,
            }
        }
    };
    if let Some(ts) = raw.thread_stride {
        match p.access {
            Access::Random { .. } => {
                return err("-T (thread stride) applies to sequential access; it contradicts -r")
            }
            Access::Sequential {
                interlocked: true, ..
            } => {
                return err(
                    "-T (thread stride) contradicts -si (threads share one sequential offset)",
                )
            }
            _ => {}
        }
        p.thread_stride = ts.resolve(block, "-T")?;
    }
    if let Some(c) = raw.create {
        let c = c.resolve(block, "-c")?;
        if c == 0 {
            return err("-c: the size to create must be positive");
        }
        p.create_size = Some(c);
    }
    p.write_buffer = match raw.zbuf {
        None => WriteBuffer::Pattern,
        Some(RawZ::Zero) => WriteBuffer::Zero,
        Some(RawZ::PerIo) => WriteBuffer::RandomPerIo,
        Some(RawZ::Buffer(s)) => {
            let s = s.resolve(block, "-Z")?;
            if s < block {
                return err(format!(
                    "-Z: the write buffer ({s} bytes) is smaller than the block size ({block})"
                ));
            }
            if s > 1 << 32 {
                return err("-Z: the write buffer must be at most 4G");
            }
            WriteBuffer::RandomBuffer(s)
        }
    };
    if let Some((_, nocache, wt)) = raw.caching {
        p.no_cache = nocache;
        p.write_through = wt;
    }
    if let Some((base, len)) = raw.base {
        p.base = base.resolve(block, "-B")?;
        if let Some(l) = len {
            p.max_len = Some(l.resolve(block, "-B")?);
        }
    }
    if let Some(f) = raw.max_len {
        if p.max_len.is_some() {
            return err("-f and -B<base>:<len> both set the region length");
        }
        p.max_len = Some(f.resolve(block, "-f")?);
    }
    if let Some(len) = p.max_len {
        if len < block {
            return err(format!(
                "the region length ({len} bytes) is smaller than the block size ({block})"
            ));
        }
    }
    if p.no_cache {
        let align = match p.access {
            Access::Random { align } => align,
            Access::Sequential { stride, .. } => stride,
        };
        if ![block, align, p.base, p.thread_stride]
            .iter()
            .all(|v| v.is_multiple_of(512))
        {
            return err(
                "-Su/-Sh (unbuffered) needs the block size, alignment/stride, base and thread \
                 stride to be multiples of 512",
            );
        }
    }
    let inflight = u64::from(p.outstanding).saturating_mul(block);
    if inflight > 16 << 30 {
        return err(format!(
            "-o{} with -b{block} needs {inflight} bytes of buffers per thread; lower -o or -b",
            p.outstanding
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Profile, ArgError> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4K", "-b"), Ok(Size::Bytes(4096)));
        assert_eq!(parse_size("4k", "-b"), Ok(Size::Bytes(4096)));
        assert_eq!(parse_size("1M", "-b"), Ok(Size::Bytes(1 << 20)));
        assert_eq!(parse_size("2G", "-b"), Ok(Size::Bytes(2 << 30)));
        assert_eq!(parse_size("1T", "-b"), Ok(Size::Bytes(1 << 40)));
        assert_eq!(parse_size("512", "-b"), Ok(Size::Bytes(512)));
        assert_eq!(parse_size("8b", "-b"), Ok(Size::Blocks(8)));
        assert!(parse_size("", "-b").is_err());
        assert!(parse_size("K", "-b").is_err());
        assert!(parse_size("4X", "-b").is_err());
        assert!(parse_size("4KB", "-b").is_err());
        assert!(parse_size("-4", "-b").is_err());
        assert!(parse_size("99999999999999999999", "-b").is_err());
        assert!(parse_size("17179869184G", "-b").is_err());
    }

    #[test]
    fn defaults_are_diskspds() {
        let p = parse_str("file").unwrap();
        assert_eq!(p.block_size, 65536);
        assert_eq!(p.outstanding, 2);
        assert_eq!(p.threads_per_target, 1);
        assert_eq!(p.duration_s, 10);
        assert_eq!(p.warmup_s, 5);
        assert_eq!(
            p.access,
            Access::Sequential {
                stride: 65536,
                interlocked: false
            }
        );
        assert_eq!(p.format, Format::Text);
        assert_eq!(p.targets, vec!["file".to_string()]);
    }

    #[test]
    fn the_issue_example() {
        let p = parse_str("-b4K -o32 -t2 -r -w30 -d10 -W0 -C1 -L -D500 -Rjson f1 smb://h/s/f2")
            .unwrap();
        assert_eq!(p.block_size, 4096);
        assert_eq!(p.outstanding, 32);
        assert_eq!(p.threads_per_target, 2);
        assert_eq!(p.access, Access::Random { align: 4096 });
        assert_eq!(p.write_percent, 30);
        assert_eq!((p.duration_s, p.warmup_s, p.cooldown_s), (10, 0, 1));
        assert!(p.latency_flag);
        assert_eq!(p.iops_interval_ms, 500);
        assert_eq!(p.format, Format::Json);
        assert_eq!(p.targets.len(), 2);
        assert_eq!(p.thread_layout(), vec![vec![0], vec![0], vec![1], vec![1]]);
        assert_eq!(p.thread_rank_on_target(3), 1);
    }

    #[test]
    fn glued_values_and_blocks() {
        let p = parse_str("-b8K -r2b -c1G -B1M:64M -Z1M -z42 -g100i -Sh f").unwrap();
        assert_eq!(p.access, Access::Random { align: 16384 });
        assert_eq!(p.create_size, Some(1 << 30));
        assert_eq!((p.base, p.max_len), (1 << 20, Some(64 << 20)));
        assert_eq!(p.write_buffer, WriteBuffer::RandomBuffer(1 << 20));
        assert_eq!(p.seed, 42);
        assert_eq!(p.throttle, Some(Throttle::Iops(100)));
        assert!(p.no_cache && p.write_through);

        let p = parse_str("-si64K -g512 -Zr -Sw -f1M f").unwrap();
        assert_eq!(
            p.access,
            Access::Sequential {
                stride: 65536,
                interlocked: true
            }
        );
        assert_eq!(p.throttle, Some(Throttle::BytesPerMs(512)));
        assert_eq!(p.write_buffer, WriteBuffer::RandomPerIo);
        assert!(!p.no_cache && p.write_through);
        assert_eq!(p.max_len, Some(1 << 20));

        let p = parse_str("-s -T1M -Z -Su -F3 a b").unwrap();
        assert_eq!(p.thread_stride, 1 << 20);
        assert_eq!(p.write_buffer, WriteBuffer::Zero);
        assert!(p.no_cache && !p.write_through);
        assert_eq!(p.thread_layout(), vec![vec![0, 1]; 3]);
        assert_eq!(p.threads_on_target(), 3);

        let p = parse_str("-S -h0 f").err();
        assert!(p.is_some(), "-h takes no value");
        let p = parse_str("-S f").unwrap();
        assert!(p.no_cache && !p.write_through);
        let p = parse_str("-h f").unwrap();
        assert!(p.no_cache && p.write_through);
        let p = parse_str("-Suw -Sb").err().unwrap();
        assert!(p.0.contains("twice"), "{p}");
    }

    #[test]
    fn long_options() {
        let p = parse_str("--progress --server-pid 1234 --engine psync -R xml f").unwrap();
        assert!(p.progress);
        assert_eq!(p.server_pid, Some(1234));
        assert_eq!(p.engine, Engine::Psync);
        assert_eq!(p.format, Format::Xml);
        let p = parse_str("--server-pid=7 --engine=uring f").unwrap();
        assert_eq!(p.server_pid, Some(7));
        assert_eq!(p.engine, Engine::Uring);
        let p = parse_str("--multichannel 3 f").unwrap();
        assert_eq!(p.multichannel, Some(3));
        assert_eq!(parse_str("--ios 5000 f").unwrap().max_ios, Some(5000));
        assert_eq!(parse_str("f").unwrap().max_ios, None);
        assert!(parse_str("--ios 0 f").is_err());
        assert!(parse_str("--ios x f").is_err());
        assert_eq!(parse_str("--os-threads 2 f").unwrap().os_threads, Some(2));
        assert!(parse_str("--os-threads 0 f").is_err());
        assert!(
            parse_str("--shared-connection f")
                .unwrap()
                .shared_connection
        );
        // Each long option said to take no value parses with none, the target after it.
        for name in LONG_WITHOUT_VALUE {
            let p = parse_str(&format!("--{name} f")).unwrap();
            assert_eq!(p.targets, ["f"], "--{name}");
        }
        assert!(!parse_str("f").unwrap().shared_connection);
        assert_eq!(parse_str("f").unwrap().affinity, None);
        assert_eq!(
            parse_str("--affinity=2-3,0 f").unwrap().affinity,
            Some(vec![2, 3, 0])
        );
        assert_eq!(parse_str("--affinity 1 f").unwrap().affinity, Some(vec![1]));
        let e = parse_str("--affinity 0,z f").unwrap_err();
        assert!(e.0.contains("'z'"), "{}", e.0);
        assert!(parse_str("--multichannel 0 f").is_err());
        assert!(parse_str("--multichannel 33 f").is_err());
        let p = parse_str("--transport rdma --rdma-threshold 65536 f").unwrap();
        assert_eq!(p.transport, Some(smbx_client::Transport::Rdma));
        assert_eq!(p.rdma_threshold, Some(65536));
        assert_eq!(parse_str("f").unwrap().spin_us, None);
        assert_eq!(parse_str("--spin-us 0 f").unwrap().spin_us, Some(0));
        assert_eq!(parse_str("--spin-us=250 f").unwrap().spin_us, Some(250));
        assert!(parse_str("--spin-us x f").is_err());
        let p = parse_str("--socket-options=SO_RCVBUF=1048576,TCP_NODELAY f").unwrap();
        assert_eq!(
            p.socket_options.as_deref(),
            Some("SO_RCVBUF=1048576,TCP_NODELAY")
        );
        assert!(parse_str("--socket-options SO_RCVBUF=x f").is_err());
        assert!(parse_str("--socket-options TCP_QUICKACK f").is_err());
        assert!(!p.kerberos);
        assert!(parse_str("--kerberos smb://h/s/f").unwrap().kerberos);
        for bad in [
            "--kerberos=yes f",
            "-k f",
            "--transport udp f",
            "--server-pid f",
            "--server-pid",
            "--engine aio f",
            "--frobnicate f",
            "--progress=1 f",
            "--progress --progress f",
        ] {
            assert!(parse_str(bad).is_err(), "{bad}");
        }
    }

    fn fails_with(args: &str, needle: &str) {
        match parse_str(args) {
            Ok(p) => panic!("{args:?} parsed: {p:?}"),
            Err(e) => assert!(e.0.contains(needle), "{args:?}: {e} lacks {needle:?}"),
        }
    }

    #[test]
    fn bad_values() {
        fails_with("-b4K", "no target");
        fails_with("-b f", "expected a size");
        fails_with("-b0 f", "positive");
        fails_with("-b2b f", "blocks");
        fails_with("-b2G f", "at most 1G");
        fails_with("-o0 f", "outside 1..1024");
        fails_with("-o1025 f", "outside 1..1024");
        fails_with("-ox f", "expected");
        fails_with("-t0 f", "outside");
        fails_with("-w101 f", "more than 100");
        fails_with("-w-1 f", "expected");
        fails_with("-d0 f", "at least 1 second");
        fails_with("-d f", "expected seconds");
        fails_with("-D0 f", "at least 1 ms");
        fails_with("-r0 f", "positive");
        fails_with("-s0 f", "positive");
        fails_with("-Lx f", "takes no value");
        fails_with("-Sx f", "unknown caching mode");
        fails_with("-g0 f", "positive");
        fails_with("-gfast f", "expected");
        fails_with("-Rcsv f", "unknown format");
        fails_with("-R", "needs a format");
        fails_with("-Z1K -b4K f", "smaller than the block size");
        fails_with("-B0:1K -b4K f", "smaller than the block size");
        fails_with("-c0 f", "positive");
        fails_with("-q f", "unknown flag");
        fails_with("-a0 f", "does not support");
        fails_with("-b4K -b8K f", "given twice");
        fails_with("-Sh -h f", "given twice");
        fails_with("-o1024 -b32M f", "lower -o or -b");
    }

    #[test]
    fn contradictions() {
        fails_with("-r -s f", "contradict");
        fails_with("-t2 -F2 f", "contradict");
        fails_with("-Sbw f", "contradicts");
        fails_with("-r -T4K f", "contradicts -r");
        fails_with("-si -T4K f", "contradicts -si");
        fails_with("-B0:1M -f1M f", "both set");
        fails_with("-Su -b1000 f", "multiples of 512");
        fails_with("-Su -r100 f", "multiples of 512");
        fails_with("-Z -Zr f", "given twice");
    }
}
