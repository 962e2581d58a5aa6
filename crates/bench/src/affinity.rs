//! `--affinity <cpu list>`: the bench's OS threads pinned round-robin over a list of CPUs
//! (diskspd's `-a`, fio's `cpus_allowed`). On a VM whose scheduler packs a busy pair of
//! threads onto one vCPU, this keeps the client off the server's CPU.

use std::io;

/// The most CPUs a list may name (the size of the kernel's `cpu_set_t`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Parses a CPU list as the kernel writes one: comma-separated CPU numbers and inclusive
/// ranges (`1`, `0,1`, `2-5`, `0-2,6`). The CPUs keep their order (the first OS thread goes
/// on the first); a CPU named twice is an error. An error names the bad entry.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for entry in s.split(',') {
        let entry = entry.trim();
        let cpu = |t: &str| -> Result<usize, String> {
            let n: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("'{entry}' is not a CPU number or a range a-b"))?;
            if n >= MAX_CPUS {
                return Err(format!(
                    "'{entry}': CPU {n} is beyond the last ({MAX_CPUS} CPUs at most)"
                ));
            }
            Ok(n)
        };
        let (first, last) = match entry.split_once('-') {
            Some((a, b)) => (cpu(a)?, cpu(b)?),
            None => {
                let n = cpu(entry)?;
                (n, n)
            }
        };
        if first > last {
            return Err(format!("'{entry}': the range ends before it starts"));
        }
        for n in first..=last {
            if cpus.contains(&n) {
                return Err(format!("'{entry}': CPU {n} is named twice"));
            }
            cpus.push(n);
        }
    }
    Ok(cpus)
}

/// The CPUs this process may run on (its affinity mask), in ascending order.
pub fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it, for the calling thread (pid 0); CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..MAX_CPUS)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Checks that `cpus` names at least one CPU and only CPUs this process may run on.
pub fn check_allowed(cpus: &[usize]) -> Result<(), String> {
    if cpus.is_empty() {
        return Err("the CPU list is empty".into());
    }
    let ok = allowed().map_err(|e| format!("reading this process's CPU affinity: {e}"))?;
    match cpus.iter().find(|c| !ok.contains(c)) {
        Some(c) => Err(format!(
            "CPU {c} is not one this process may run on (allowed: {})",
            cpu_list_label(&ok)
        )),
        None => Ok(()),
    }
}

/// Keeps the calling thread on `cpu` alone.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= MAX_CPUS {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes bit `cpu` (< CPU_SETSIZE,
    // checked above) into it; sched_setaffinity only reads the set, for the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> io::Result<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let n = unsafe { libc::sched_getcpu() };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// `cpus` written as a list (`0,1,2`).
pub fn cpu_list_label(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges_keep_their_order() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("2-5").unwrap(), vec![2, 3, 4, 5]);
        assert_eq!(parse_cpu_list("3,0-1, 7").unwrap(), vec![3, 0, 1, 7]);
        assert_eq!(parse_cpu_list("4-4").unwrap(), vec![4]);
    }

    #[test]
    fn a_bad_entry_is_named() {
        for (list, bad) in [
            ("", "''"),
            ("1,", "''"),
            ("0,x", "'x'"),
            ("1-", "'1-'"),
            ("-3", "'-3'"),
            ("5-2", "'5-2'"),
            ("0,1-3,2", "'2'"),
            ("0,99999", "'99999'"),
            ("1-2-3", "'1-2-3'"),
        ] {
            let e = parse_cpu_list(list).unwrap_err();
            assert!(e.contains(bad), "{list:?}: {e}");
        }
    }

    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused() {
        let ok = allowed().unwrap();
        assert!(!ok.is_empty());
        assert!(check_allowed(&ok).is_ok());
        let outside = (0..MAX_CPUS).find(|c| !ok.contains(c)).unwrap();
        let e = check_allowed(&[ok[0], outside]).unwrap_err();
        assert!(e.contains(&format!("CPU {outside} ")), "{e}");
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cpu() {
        let ok = allowed().unwrap();
        // The last allowed CPU: on a machine with several, not where the test started.
        let cpu = *ok.last().unwrap();
        let (mask, now) = std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            std::thread::yield_now();
            (allowed().unwrap(), current_cpu().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(mask, vec![cpu]);
        assert_eq!(now, cpu);
    }
}
