//! `harness bench`: each benchmark lives in `maintainer_tools::bench::*`.

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
    Gate(maintainer_tools::bench::gate::Args),
    /// Graders vs jq on a generated event log: throughput and peak memory.
    Graders(maintainer_tools::bench::graders::Args),
    /// Fake app-server vs real Codex start-up; JSON-RPC round trips per second.
    Fake(maintainer_tools::bench::fake::Args),
    /// Wall time of all fake cells, per-cell medians, scaling with parallelism.
    Matrix(maintainer_tools::bench::matrix::Args),
    /// The wire tap: round trips through it vs direct, and its share of a real-Codex cell.
    Tap(maintainer_tools::bench::tap::Args),
}

pub fn main(args: Args) -> ExitCode {
    use maintainer_tools::bench::{fake, tap};
    match args.which {
        Which::Gate(args) => maintainer_tools::bench::gate::main(args),
        Which::Graders(args) => maintainer_tools::bench::graders::main(args),
        Which::Fake(args) => print_measured("fake", fake::run(&args), fake::render, &args.json),
        Which::Matrix(args) => maintainer_tools::bench::matrix::main(args),
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
