//! `smbx bench` without the rest of the smbx binary:
//! `cargo run --release -p smbx-bench --example bench -- -b4K -o32 -r -d10 FILE`.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match smbx_bench::run_cli(&args) {
        Ok(report) => {
            print!("{report}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("smbx bench: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
