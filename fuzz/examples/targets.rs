//! Prints one line per fuzz target: its name, then every corpus directory
//! its seeds come from (for scripts/fuzz.sh).

fn main() {
    for t in smbx_fuzz::TARGETS {
        let mut line = format!("{} {}", t.name, t.name);
        for d in t.also_seeds {
            line.push(' ');
            line.push_str(d);
        }
        println!("{line}");
    }
}
