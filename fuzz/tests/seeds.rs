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

/// The seeds the crates' own encoders make (`smbx_fuzz::seedgen`) pass
/// through their targets, and the committed `corpus/<target>/gen-*` files
/// are those bytes (an encoder change that leaves them stale fails here).
/// With SMBX_FUZZ_WRITE_SEEDS=1 they are (re)written instead.
#[test]
fn generated_seeds_pass() {
    let write = std::env::var_os("SMBX_FUZZ_WRITE_SEEDS").is_some();
    let all = smbx_fuzz::seedgen::all();
    assert!(!all.is_empty());
    let mut stale = Vec::new();
    for s in all {
        let t = smbx_fuzz::target(s.target).expect("seed for a known target");
        run_guarded(t.name, t.run, &s.bytes);
        let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("corpus")
            .join(s.target);
        if write {
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(&s.name), &s.bytes).unwrap();
        } else if std::fs::read(d.join(&s.name)).ok().as_deref() != Some(&s.bytes[..]) {
            stale.push(format!("{}/{}", s.target, s.name));
        }
    }
    assert!(
        stale.is_empty(),
        "committed seeds differ from the encoders' (rewrite them with \
         SMBX_FUZZ_WRITE_SEEDS=1 cargo test --test seeds): {stale:?}"
    );
}

/// The generated iWARP streams reach the engine's data paths (so mutations
/// of them do too): the peer's Send lands in a receive, its RDMA Write in
/// the writable region, and our own Send and RDMA Read complete.
#[test]
fn generated_iwarp_streams_place_data() {
    use smbx_rdma::{MemoryRegion, WcOpcode, WcStatus};
    for s in smbx_fuzz::seedgen::all() {
        if s.target != "iwarp_engine" {
            continue;
        }
        let o = smbx_fuzz::iwarp_engine::run(&s.bytes).expect("MPA setup");
        assert_eq!(o.closed, None, "{}", s.name);
        let ok = |op| {
            o.completions
                .iter()
                .any(|c| c.opcode == op && c.status == WcStatus::Success)
        };
        assert!(
            ok(WcOpcode::Recv) && ok(WcOpcode::Send) && ok(WcOpcode::RdmaRead),
            "{}: {:?}",
            s.name,
            o.completions
        );
        let w = o.regions.writable.with(|b| b[8..34].to_vec());
        assert_eq!(w, b"hello from the fuzz target", "{}", s.name);
    }
}

/// The generated SMB Direct scripts negotiate and deliver the peer's
/// messages (fragmented under the small configurations), and send ours.
#[test]
fn generated_direct_scripts_deliver_messages() {
    for s in smbx_fuzz::seedgen::all() {
        if s.target != "direct_connection" {
            continue;
        }
        let (stats, negotiated) = smbx_fuzz::direct::run_script(&s.bytes).unwrap();
        assert!(negotiated, "{}", s.name);
        assert_eq!(stats.messages_delivered, 1, "{}", s.name);
        assert!(stats.data_messages_received >= 2, "{}", s.name);
        assert!(stats.data_messages_sent >= 2, "{}", s.name);
        if s.bytes[0] >> 1 == 0 {
            // Default configuration: the keepalive goes out at once.
            assert!(stats.keepalives_sent >= 1, "{}", s.name);
        }
    }
}
