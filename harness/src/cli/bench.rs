//! `harness bench`: each benchmark lives in `crate::bench::*`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(clap::Subcommand, Debug)]
pub enum Which {
    /// A driver's PR gate (its fake cells in every environment) against the same sessions of
    /// that driver run directly against the fake: the ratio of their wall times.
    Gate(crate::bench::gate::Args),
    /// Graders vs jq on a generated event log: throughput and peak memory.
    Graders(crate::bench::graders::Args),
    /// Fake app-server vs real Codex start-up; JSON-RPC round trips per second.
    Fake(crate::bench::fake::Args),
    /// Wall time of all fake cells, per-cell medians, scaling with parallelism.
    Matrix(crate::bench::matrix::Args),
    /// The wire tap: round trips through it vs direct, and its share of a real-Codex cell.
    Tap(crate::bench::tap::Args),
}

pub fn main(args: Args) -> ExitCode {
    use crate::bench::{fake, tap};
    match args.which {
        Which::Gate(args) => crate::bench::gate::main(args),
        Which::Graders(args) => crate::bench::graders::main(args),
        Which::Fake(args) => print_measured("fake", fake::run(&args), fake::render, &args.json),
        Which::Matrix(args) => crate::bench::matrix::main(args),
        Which::Tap(args) => print_measured("tap", tap::run(&args), tap::render, &args.json),
    }
}

/// Print a benchmark's report (and write it as JSON where asked); a failure, named by the
/// benchmark, is exit code 1.
fn print_measured<R: serde::Serialize>(
    bench: &str,
    measured: anyhow::Result<R>,
    render: fn(&R) -> String,
    json: &Option<PathBuf>,
) -> ExitCode {
    let report = match measured {
        Ok(report) => report,
        Err(err) => {
            eprintln!("harness bench {bench}: {err:#}");
            return ExitCode::from(1);
        }
    };
    print!("{}", render(&report));
    if let Some(path) = json {
        if let Err(err) =
            std::fs::write(path, serde_json::to_vec_pretty(&report).unwrap_or_default())
        {
            eprintln!(
                "harness bench {bench}: cannot write {}: {err}",
                path.display()
            );
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
