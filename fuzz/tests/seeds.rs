//! Stable harness: every seed of every target, then thousands of mutations of each,
//! through the decoders. A panic fails the test and prints the input that caused it.

use std::path::PathBuf;

use smbx_fuzz::{Mutator, TARGETS};

/// Mutations per target (spread over its seeds). Override with SMBX_FUZZ_ITERS.
fn iterations() -> usize {
    std::env::var("SMBX_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn seeds(dir: &str) -> Vec<Vec<u8>> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(dir);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&d)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.into_iter().map(|(_, b)| b).collect()
}

fn run_guarded(name: &str, f: fn(&[u8]), input: &[u8]) {
    if std::panic::catch_unwind(|| f(input)).is_err() {
        panic!("target {name} panicked on input {}", hex(input));
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_target_has_seeds() {
    for t in TARGETS {
        let n = seeds(t.name).len() + t.also_seeds.iter().map(|d| seeds(d).len()).sum::<usize>();
        assert!(
            n > 0 || ["change_notify", "oplock_break"].contains(&t.name),
            "no seeds for {}",
            t.name
        );
    }
}

#[test]
fn seeds_and_mutations_never_panic() {
    let iters = iterations();
    for (ti, t) in TARGETS.iter().enumerate() {
        let mut all = seeds(t.name);
        for d in t.also_seeds {
            all.extend(seeds(d));
        }
        all.push(Vec::new());
        for s in &all {
            run_guarded(t.name, t.run, s);
        }
        let mut m = Mutator::new(0x5EED_0000 + ti as u64);
        for i in 0..iters {
            let base = &all[i % all.len()];
            let input = m.mutate(base);
            run_guarded(t.name, t.run, &input);
        }
    }
}

#[test]
fn mutator_is_deterministic_and_bounded() {
    let mut a = Mutator::new(7);
    let mut b = Mutator::new(7);
    let seed = vec![0xFEu8; 100];
    for _ in 0..1000 {
        let x = a.mutate(&seed);
        assert_eq!(x, b.mutate(&seed));
        assert!(x.len() <= 64 * 1024);
    }
}
