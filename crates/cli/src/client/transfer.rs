//! `get`, `cat` and `put`: streaming transfers with several READs or WRITEs in flight.
//!
//! The file moves in `--chunk` pieces (1 MiB by default) with `--depth` of them (8) on
//! the wire at once; reads complete in any order but are written out in order, so memory
//! stays at depth × chunk whatever the file's size.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use smbx_client::{create_options, File, OpenOptions, Tree};

use super::args::IoArgs;
use super::progress::Progress;
use super::{CmdResult, Failure};

fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

async fn open_for_read(tree: &Tree, path: &str) -> CmdResult<File> {
    if path.is_empty() {
        return Err(Failure::new("the URL names no file"));
    }
    let mut opts = OpenOptions::read_only();
    opts.options |= create_options::NON_DIRECTORY_FILE | create_options::SEQUENTIAL_ONLY;
    Ok(tree.open(path, &opts).await?)
}

/// Reads the whole of `f` (its size at open) into `out`, in order; returns the bytes.
async fn download(f: &File, out: &mut dyn Write, io: &IoArgs, bar: &Progress) -> CmdResult<u64> {
    let size = f.size_at_open();
    let chunk = io.chunk as u64;
    let depth = io.depth as usize;
    let mut next = 0u64;
    let mut done = 0u64;
    let mut inflight = FuturesOrdered::new();
    loop {
        while inflight.len() < depth && next < size {
            let len = chunk.min(size - next) as usize;
            let off = next;
            inflight.push_back(async move { (len, f.read_at(off, len).await) });
            next += len as u64;
        }
        let Some((want, got)) = inflight.next().await else {
            break;
        };
        let data = got?;
        match out.write_all(&data) {
            // The reader went away (`smbx cat URL | head`): stop quietly, as cat does.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(done),
            r => r.map_err(|e| Failure::new(format!("writing: {e}")))?,
        }
        done += data.len() as u64;
        bar.inc(data.len() as u64);
        if data.len() < want {
            // The file shrank while we read it: what follows lies past its end.
            break;
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::new(format!("writing: {e}")))
        }
        _ => Ok(done),
    }
}

/// `get URL [LOCAL]`.
pub async fn get(tree: &Tree, path: &str, local: Option<&Path>, io: &IoArgs) -> CmdResult {
    let name = last_component(path);
    let f = open_for_read(tree, path).await?;
    if local == Some(Path::new("-")) {
        return to_stdout(f, io, false).await;
    }
    let dest: PathBuf = match local {
        None => PathBuf::from(name),
        Some(p) if p.is_dir() => p.join(name),
        Some(p) => p.to_path_buf(),
    };
    let file = std::fs::File::create(&dest)
        .map_err(|e| Failure::new(format!("cannot create {}: {e}", dest.display())))?;
    let mut out = std::io::BufWriter::with_capacity(io.chunk, file);
    let bar = Progress::new(Some(f.size_at_open()));
    let r = download(&f, &mut out, io, &bar).await;
    bar.finish();
    let c = f.close().await;
    r?;
    c?;
    out.into_inner()
        .map_err(|e| Failure::new(format!("writing {}: {}", dest.display(), e.error())))?;
    Ok(())
}

async fn to_stdout(f: File, io: &IoArgs, quiet: bool) -> CmdResult {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let bar = if quiet {
        Progress::none()
    } else {
        Progress::new(Some(f.size_at_open()))
    };
    let r = download(&f, &mut out, io, &bar).await;
    bar.finish();
    let c = f.close().await;
    r?;
    c?;
    Ok(())
}

/// `cat URL`: the file to stdout (no progress bar).
pub async fn cat(tree: &Tree, path: &str, io: &IoArgs) -> CmdResult {
    let f = open_for_read(tree, path).await?;
    to_stdout(f, io, true).await
}

/// Fills `buf` from `r` until full or end of input; returns the bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Writes everything `input` yields to `f` from offset 0; returns the bytes.
async fn upload(f: &File, input: &mut dyn Read, io: &IoArgs, bar: &Progress) -> CmdResult<u64> {
    let depth = io.depth as usize;
    let mut off = 0u64;
    let mut inflight = FuturesUnordered::new();
    let mut eof = false;
    while !eof || !inflight.is_empty() {
        while !eof && inflight.len() < depth {
            let mut buf = vec![0u8; io.chunk];
            let n =
                read_full(input, &mut buf).map_err(|e| Failure::new(format!("reading: {e}")))?;
            if n < buf.len() {
                eof = true;
                buf.truncate(n);
            }
            if n == 0 {
                break;
            }
            let at = off;
            off += n as u64;
            inflight.push(async move { f.write_at(at, &buf).await });
        }
        if let Some(r) = inflight.next().await {
            bar.inc(r? as u64);
        }
    }
    Ok(off)
}

/// `put LOCAL URL`.
pub async fn put(tree: &Tree, local: &Path, path: &str, io: &IoArgs) -> CmdResult {
    let stdin = local == Path::new("-");
    let (mut input, size): (Box<dyn Read>, Option<u64>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let file = std::fs::File::open(local)
            .map_err(|e| Failure::new(format!("cannot open {}: {e}", local.display())))?;
        let size = file.metadata().ok().map(|m| m.len());
        (Box::new(file), size)
    };
    let base = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|_| !stdin);
    let target_is_dir = path.is_empty() || matches!(tree.stat(path).await, Ok(i) if i.is_dir());
    let dest = if target_is_dir {
        let base = base
            .ok_or_else(|| Failure::new("the URL names a directory: give the file's name in it"))?;
        if path.is_empty() {
            base
        } else {
            format!("{path}/{base}")
        }
    } else {
        path.to_string()
    };
    let mut opts = OpenOptions::create_truncate();
    opts.options |= create_options::NON_DIRECTORY_FILE | create_options::SEQUENTIAL_ONLY;
    let f = tree.open(&dest, &opts).await?;
    let bar = Progress::new(size);
    let r = upload(&f, &mut *input, io, &bar).await;
    bar.finish();
    let c = f.close().await;
    r?;
    c?;
    Ok(())
}
