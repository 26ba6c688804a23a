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
    Graders(crate::bench::graders::Args),
    /// Fake app-server vs real Codex start-up; JSON-RPC round trips per second.
    Fake(crate::bench::fake::Args),
    /// Wall time of all fake cells, per-cell medians, scaling with parallelism.
    Matrix(crate::bench::matrix::Args),
}

pub fn main(args: Args) -> ExitCode {
    if let Which::Graders(graders_args) = args.which {
        return crate::bench::graders::main(graders_args);
    }
    if let Which::Fake(fake_args) = args.which {
        return crate::bench::fake::main(fake_args);
    }
    if let Which::Matrix(matrix_args) = args.which {
        return crate::bench::matrix::main(matrix_args);
    }
    eprintln!("harness bench {:?}: not implemented yet", args.which);
    ExitCode::from(2)
}
