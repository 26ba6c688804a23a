//! `harness bench`: each benchmark lives in `crate::bench::*`.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(clap::Subcommand, Debug)]
pub enum Which {
    /// Graders vs jq on a generated event log: throughput and peak memory.
    Graders,
    /// Fake app-server vs real Codex start-up; JSON-RPC round trips per second.
    Fake,
    /// Wall time of all fake cells, per-cell medians, scaling with parallelism.
    Matrix,
}

pub fn main(args: Args) -> ExitCode {
    eprintln!("harness bench {:?}: not implemented yet", args.which);
    ExitCode::from(2)
}
