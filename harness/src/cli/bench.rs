//! `harness bench`: each benchmark lives in `crate::bench::*`.

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
    match args.which {
        Which::Gate(args) => crate::bench::gate::main(args),
        Which::Graders(args) => crate::bench::graders::main(args),
        Which::Fake(args) => crate::bench::fake::main(args),
        Which::Matrix(args) => crate::bench::matrix::main(args),
        Which::Tap(args) => crate::bench::tap::main(args),
    }
}
