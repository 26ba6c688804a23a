//! `harness drift VERSION`: compare a published Codex with the pin (see `maintainer_tools::drift`).

use maintainer_tools::drift;
use matrix::context::CellContext;
use matrix::paths;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The published `@openai/codex` version to compare with the pin (installed into the cache
    /// like the pinned ones).
    #[arg(value_parser = super::codex_version)]
    pub version: String,
    /// Only matrix cells whose pair name contains one of these (all when empty).
    pub filters: Vec<String>,
    /// Compare the protocol only; do not play the matrix on VERSION.
    #[arg(long)]
    pub no_matrix: bool,
    /// Where the schemas, the cells' evidence and `drift.md` go (default:
    /// `<conformance>/drift-VERSION`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<std::path::PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| paths::conformance_root().join(format!("drift-{}", args.version)));
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("harness drift: creating {}: {e}", out.display());
        return ExitCode::from(2);
    }
    let protocol = match drift::protocol_drift(&args.version, &out) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("harness drift: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut outcomes = Vec::new();
    if !args.no_matrix {
        let matrix = match suites::load() {
            Ok(m) => m,
            Err(e) => {
                eprintln!("harness drift: {e}");
                return ExitCode::from(2);
            }
        };
        let mut ctx = match CellContext::from_env() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("harness drift: {e:#}");
                return ExitCode::from(2);
            }
        };
        ctx.out_root = out.join("cells");
        let pairs = drift::matrix_pairs(&matrix, &args.version, &args.filters);
        let runtime = match tokio::runtime::Runtime::new() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("harness drift: starting the runtime: {e}");
                return ExitCode::from(2);
            }
        };
        outcomes = runtime.block_on(drift::run_matrix(&pairs, &ctx));
        sandbox::teardown::tear_down_everything();
    }
    let report = drift::render(&protocol, &outcomes);
    print!("{report}");
    let path = out.join("drift.md");
    if let Err(e) = std::fs::write(&path, &report) {
        eprintln!("harness drift: writing {}: {e}", path.display());
        return ExitCode::from(2);
    }
    eprintln!("report: {}", path.display());
    // Drift is information, not failure: differences are the point of the report.
    ExitCode::SUCCESS
}
