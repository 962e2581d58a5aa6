//! What a run does: the parsed, validated form of the command line.

use serde::Serialize;

/// The most I/Os one thread keeps in flight against one target (`-o`).
pub const MAX_OUTSTANDING: u32 = 1024;

/// How offsets are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Access {
    /// `-s[i][stride]`: sequential, advancing by `stride` bytes; `interlocked` threads share
    /// one offset per target.
    Sequential {
        /// Bytes between successive I/Os.
        stride: u64,
        /// One shared offset per target (`-si`) instead of one per thread.
        interlocked: bool,
    },
    /// `-r[align]`: uniformly random offsets that are multiples of `align`.
    Random {
        /// Offset alignment in bytes.
        align: u64,
    },
}

/// Where the data of writes comes from (`-Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "size", rename_all = "snake_case")]
pub enum WriteBuffer {
    /// Default: the repeating byte pattern 0, 1, …, 255 (diskspd's default).
    Pattern,
    /// `-Z`: zeros.
    Zero,
    /// `-Zr`: fresh random bytes for every write.
    RandomPerIo,
    /// `-Z<size>`: a buffer of this many random bytes; each write takes a block from it.
    RandomBuffer(u64),
}

/// `-g`: a throttle per thread per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Throttle {
    /// `-g<n>`: bytes per millisecond.
    BytesPerMs(u64),
    /// `-g<n>i`: I/Os per second.
    Iops(u64),
}

/// `--sign` / `--seal`: how smb:// targets protect their messages (SMB 3.1.1; the one
/// algorithm named is the only one offered, so the server must use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    /// Whatever the server requires (the default).
    #[default]
    Default,
    /// `--sign` or `--sign=gmac`: every message signed with AES-128-GMAC.
    SignGmac,
    /// `--sign=cmac`: every message signed with AES-128-CMAC.
    SignCmac,
    /// `--seal` or `--seal=aes-128-gcm`: every message encrypted with AES-128-GCM.
    SealAes128Gcm,
    /// `--seal=aes-128-ccm`.
    SealAes128Ccm,
    /// `--seal=aes-256-gcm`.
    SealAes256Gcm,
    /// `--seal=aes-256-ccm`.
    SealAes256Ccm,
}

impl Protection {
    /// `--sign[=VALUE]`.
    pub fn sign(value: Option<&str>) -> Option<Protection> {
        match value.unwrap_or("gmac") {
            "gmac" => Some(Protection::SignGmac),
            "cmac" => Some(Protection::SignCmac),
            _ => None,
        }
    }

    /// `--seal[=VALUE]`.
    pub fn seal(value: Option<&str>) -> Option<Protection> {
        match value.unwrap_or("aes-128-gcm") {
            "aes-128-gcm" => Some(Protection::SealAes128Gcm),
            "aes-128-ccm" => Some(Protection::SealAes128Ccm),
            "aes-256-gcm" => Some(Protection::SealAes256Gcm),
            "aes-256-ccm" => Some(Protection::SealAes256Ccm),
            _ => None,
        }
    }

    /// Client options that ask for this protection.
    pub fn apply(self, o: smbx_client::ClientOptions) -> smbx_client::ClientOptions {
        use smbx_client::{CipherId, Encryption, Signing, SigningAlgorithm};
        let seal = |o: smbx_client::ClientOptions, c: CipherId| {
            o.with_encryption(Encryption::Required).with_ciphers(&[c])
        };
        let sign = |o: smbx_client::ClientOptions, a: SigningAlgorithm| {
            o.with_signing(Signing::Required)
                .with_signing_algorithms(&[a])
        };
        match self {
            Protection::Default => o,
            Protection::SignGmac => sign(o, SigningAlgorithm::AesGmac),
            Protection::SignCmac => sign(o, SigningAlgorithm::AesCmac),
            Protection::SealAes128Gcm => seal(o, CipherId::Aes128Gcm),
            Protection::SealAes128Ccm => seal(o, CipherId::Aes128Ccm),
            Protection::SealAes256Gcm => seal(o, CipherId::Aes256Gcm),
            Protection::SealAes256Ccm => seal(o, CipherId::Aes256Ccm),
        }
    }
}

/// `-R`: the report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// diskspd's text layout (default).
    #[default]
    Text,
    /// JSON; schema in the crate README.
    Json,
    /// diskspd's `-Rxml` layout.
    Xml,
}

/// How local files are driven (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// io_uring when the kernel allows it, else psync.
    #[default]
    Auto,
    /// io_uring: up to `-o` I/Os in flight per thread per target.
    Uring,
    /// pread/pwrite: one I/O at a time per thread (like fio's psync).
    Psync,
}

/// A complete, validated benchmark profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// `-b`: bytes per I/O.
    pub block_size: u64,
    /// `-o`: I/Os in flight per thread per target.
    pub outstanding: u32,
    /// `-t`: threads per target (ignored when `total_threads` is set).
    pub threads_per_target: u32,
    /// `-F`: a fixed number of threads, each driving every target.
    pub total_threads: Option<u32>,
    /// `-r` / `-s`.
    pub access: Access,
    /// `-T`: bytes between the starting offsets of successive threads on a target.
    pub thread_stride: u64,
    /// `-w`: percentage of writes.
    pub write_percent: u8,
    /// `-d`: measured seconds.
    pub duration_s: u64,
    /// `-W`: warm-up seconds (not measured).
    pub warmup_s: u64,
    /// `-C`: cool-down seconds (not measured).
    pub cooldown_s: u64,
    /// `-L`: accepted for diskspd compatibility; latency is always measured.
    pub latency_flag: bool,
    /// `-D`: IOPS sampling interval in milliseconds.
    pub iops_interval_ms: u64,
    /// `-c`: create each target with this many random bytes first.
    pub create_size: Option<u64>,
    /// `-Z`.
    pub write_buffer: WriteBuffer,
    /// `-z`: random seed.
    pub seed: u64,
    /// `-Su` / `-Sh`: bypass the page cache (O_DIRECT; on SMB, FILE_NO_INTERMEDIATE_BUFFERING).
    pub no_cache: bool,
    /// `-Sw` / `-Sh`: write-through (O_DSYNC; on SMB, FILE_WRITE_THROUGH).
    pub write_through: bool,
    /// `-g`.
    pub throttle: Option<Throttle>,
    /// `-R`.
    pub format: Format,
    /// `-B`: first byte of the region used.
    pub base: u64,
    /// `-B<base>:<len>` or `-f<len>`: bytes of the region used (default: to end of file).
    pub max_len: Option<u64>,
    /// `--progress`: live progress line even when stderr is not a terminal.
    pub progress: bool,
    /// `--server-pid`: a process whose CPU time to report.
    pub server_pid: Option<u32>,
    /// `--ios N`: each thread issues at most N I/Os to each target (warm-up included); the
    /// run ends when they have completed, or at the end of `-d`, whichever comes first.
    pub max_ios: Option<u64>,
    /// `--os-threads N`: OS threads that run the worker threads when every target is
    /// smb:// (default: as many as the machine has cores, at most one per worker thread).
    /// Each worker thread keeps its own connection, queue depth and figures.
    pub os_threads: Option<u32>,
    /// `--shared-connection`: the worker threads one OS thread runs share one connection
    /// (session and tree) per smb:// target, each with its own open of the file.
    pub shared_connection: bool,
    /// `--affinity <cpu list>`: the OS threads are pinned round-robin over these CPUs
    /// (the first OS thread on the first); `None` leaves them to the scheduler.
    pub affinity: Option<Vec<usize>>,
    /// `--engine`.
    pub engine: Engine,
    /// `--transport tcp|rdma`: how smb:// targets are reached (a URL's `?transport=`
    /// takes precedence).
    #[serde(serialize_with = "transport_name")]
    pub transport: Option<smbx_client::Transport>,
    /// `--rdma-threshold BYTES`: over SMB Direct, I/O larger than this moves by RDMA.
    pub rdma_threshold: Option<usize>,
    /// `--spin-us N`: how long a lone request (Direct TCP or SMB Direct) spins for its
    /// response before sleeping ([`smbx_client::ClientOptions::spin_wait`]; 0: never;
    /// `None`: the client's default).
    pub spin_us: Option<u64>,
    /// `--socket-options LIST`: smb.conf-style socket options set on every smb://
    /// connection ([`smbx_client::ClientOptions::socket`]).
    pub socket_options: Option<String>,
    /// `--multichannel N`: smb:// targets' sessions may use up to N channels
    /// (a URL's `?multichannel=` takes precedence).
    pub multichannel: Option<usize>,
    /// `--sign` / `--seal`: message protection on smb:// targets.
    pub protection: Protection,
    /// `--kerberos`: smb:// targets log on with Kerberos.
    pub kerberos: bool,
    /// Targets: local paths or smb:// URLs.
    pub targets: Vec<String>,
}

/// `--transport` in JSON: "tcp", "rdma" or null.
fn transport_name<S: serde::Serializer>(
    t: &Option<smbx_client::Transport>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(smbx_client::Transport::Tcp) => s.serialize_str("tcp"),
        Some(smbx_client::Transport::Rdma) => s.serialize_str("rdma"),
        None => s.serialize_none(),
    }
}

impl Default for Profile {
    /// diskspd's defaults: 64 KiB sequential reads, 2 outstanding, 1 thread per target,
    /// 10 s after a 5 s warm-up.
    fn default() -> Self {
        Profile {
            block_size: 64 * 1024,
            outstanding: 2,
            threads_per_target: 1,
            total_threads: None,
            access: Access::Sequential {
                stride: 64 * 1024,
                interlocked: false,
            },
            thread_stride: 0,
            write_percent: 0,
            duration_s: 10,
            warmup_s: 5,
            cooldown_s: 0,
            latency_flag: false,
            iops_interval_ms: 1000,
            create_size: None,
            write_buffer: WriteBuffer::Pattern,
            seed: 0,
            no_cache: false,
            write_through: false,
            throttle: None,
            format: Format::Text,
            base: 0,
            max_len: None,
            progress: false,
            server_pid: None,
            max_ios: None,
            os_threads: None,
            shared_connection: false,
            affinity: None,
            engine: Engine::Auto,
            transport: None,
            rdma_threshold: None,
            spin_us: None,
            socket_options: None,
            multichannel: None,
            protection: Protection::Default,
            kerberos: false,
            targets: Vec::new(),
        }
    }
}

impl Profile {
    /// The worker threads: for each, the indices of the targets it drives, in order.
    /// With `-t`, threads are laid out target by target (diskspd's order); with `-F`,
    /// every thread drives every target.
    pub fn thread_layout(&self) -> Vec<Vec<usize>> {
        match self.total_threads {
            Some(n) => (0..n).map(|_| (0..self.targets.len()).collect()).collect(),
            None => (0..self.targets.len())
                .flat_map(|t| (0..self.threads_per_target).map(move |_| vec![t]))
                .collect(),
        }
    }

    /// The index of a thread among the threads driving the same target (for `-T`).
    pub fn thread_rank_on_target(&self, thread: usize) -> u64 {
        match self.total_threads {
            Some(_) => thread as u64,
            None => thread as u64 % u64::from(self.threads_per_target.max(1)),
        }
    }

    /// Threads driving each target.
    pub fn threads_on_target(&self) -> u32 {
        self.total_threads.unwrap_or(self.threads_per_target)
    }
}
