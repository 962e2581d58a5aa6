//! `memory::release_free_memory` gives back what a burst of 1 MiB I/O buffers
//! freed. One test in its own binary: the process's resident size is the
//! measurement, so nothing else may run beside it.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn freed_io_buffers_between_live_allocations_are_given_back() {
    fn rss_kib() -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let line = s
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .expect("VmRSS line");
        line.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("VmRSS value")
    }
    const MIB_KIB: u64 = 1024;

    // As in a server after its first large response: freeing one mmapped buffer
    // raises glibc's mmap threshold past it, so later 1 MiB buffers come from the heap.
    drop(std::hint::black_box(vec![1u8; 4 << 20]));
    let base = rss_kib();
    // 64 one-MiB buffers, each followed by a small allocation that stays (a
    // session, an open): freeing the buffers leaves holes malloc keeps.
    let mut big = Vec::new();
    let mut small = Vec::new();
    for i in 0..64u8 {
        big.push(vec![i | 1; 1 << 20]);
        small.push(vec![i; 100]);
    }
    let held = rss_kib();
    assert!(
        held >= base + 48 * MIB_KIB,
        "buffers not resident ({held} KiB, base {base} KiB)"
    );
    drop(big);
    let freed = rss_kib();
    smbx_server::memory::release_free_memory();
    let trimmed = rss_kib();
    eprintln!("base {base} KiB, held {held}, freed {freed}, trimmed {trimmed}");
    assert!(
        trimmed < base + 16 * MIB_KIB,
        "{trimmed} KiB resident after the trim (base {base} KiB, {freed} KiB before it)"
    );
    drop(std::hint::black_box(small));
}
