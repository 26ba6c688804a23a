//! `harness bench`: each benchmark lives in `maintainer_tools::bench::*`.

use maintainer_tools::bench::{fake, gate, graders, matrix, tap};
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
    Gate(gate::Args),
    /// Graders vs jq on a generated event log: throughput and peak memory.
    Graders(graders::Args),
    /// Fake app-server vs real Codex start-up; JSON-RPC round trips per second.
    Fake(fake::Args),
    /// Wall time of all fake cells, per-cell medians, scaling with parallelism.
    Matrix(matrix::Args),
    /// The wire tap: round trips through it vs direct, and its share of a real-Codex cell.
    Tap(tap::Args),
}

pub fn main(args: Args) -> ExitCode {
    match args.which {
        Which::Gate(args) => failed_as_2("gate", gate(&args)),
        Which::Graders(args) => failed_as_2("graders", graders(&args)),
        Which::Fake(args) => print_measured("fake", fake::run(&args), fake::render, &args.json),
        Which::Matrix(args) => failed_as_2("matrix", matrix(args)),
        Which::Tap(args) => print_measured("tap", tap::run(&args), tap::render, &args.json),
    }
}

/// A benchmark's own exit code, or 2 for its failure, named by the benchmark.
fn failed_as_2(bench: &str, ran: anyhow::Result<ExitCode>) -> ExitCode {
    ran.unwrap_or_else(|err| {
        eprintln!("harness bench {bench}: {err:#}");
        ExitCode::from(2)
    })
}

/// Its steps on stderr, the Markdown report on stdout (and in the job summary in GitHub
/// Actions), then where its files went.
fn gate(args: &gate::Args) -> anyhow::Result<ExitCode> {
    let measured = gate::run(args, &mut |step| eprintln!("{step}"))?;
    let markdown = measured.render();
    print!("{markdown}");
    let json = measured.save()?;
    eprintln!("written: {}", json.display());
    if let Err(err) = gate::append_step_summary(&markdown) {
        eprintln!("could not append to $GITHUB_STEP_SUMMARY: {err}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Everything on stdout, the steps first; exit code 1 when a target is not met.
fn graders(args: &graders::Args) -> anyhow::Result<ExitCode> {
    let report = graders::run(args, &mut |step| println!("{step}"))?;
    print!("{}", graders::render(&report));
    Ok(if report.met() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Each run of the matrix on stderr as it ends, the table on stdout, then where the JSON went.
fn matrix(args: matrix::Args) -> anyhow::Result<ExitCode> {
    let measured = matrix::run(args, &mut |rep| eprintln!("{rep}"))?;
    print!("{}", measured.render());
    let json = measured.save()?;
    eprintln!("written: {}", json.display());
    Ok(ExitCode::SUCCESS)
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
