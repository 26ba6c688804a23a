//! `harness repro ENV` (or the aliases `rtm-newaddr`, `uidmap`).

use maintainer_tools::repro::{self, Failure, Options};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The environment whose failure to reproduce (see `harness env list`), or `rtm-newaddr`
    /// (= daytona) / `uidmap` (= daytona-uidmap).
    pub failure: Failure,
    /// Keep the runc bundles, and print the commands to rerun them (runc only).
    #[arg(long)]
    pub keep: bool,
    /// Launch with network access disabled (then every sandboxed command needs a new network
    /// namespace, and in `daytona` even the fixed profile's write never runs).
    #[arg(long)]
    pub network_disabled: bool,
    /// Evidence goes to `OUT/<cell>/` (default: `$HARNESS_OUT_DIR/repro-NAME`, else
    /// `target/conformance/repro-NAME`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<std::path::PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("harness repro: {err}");
            return ExitCode::from(2);
        }
    };
    let options = Options {
        keep: args.keep,
        network_disabled: args.network_disabled,
        out_root: args.out,
    };
    match runtime.block_on(repro::run(args.failure, &options)) {
        Ok(report) => {
            print!("{}", repro::render(&report));
            if let Some(why) = repro::could_not_run(&report) {
                eprintln!(
                    "harness repro {}: could not run (this says nothing about the failure): {why}",
                    args.failure.name()
                );
                return ExitCode::from(2);
            }
            match repro::reproduced(&report) {
                Ok(()) => ExitCode::SUCCESS,
                Err(problems) => {
                    eprintln!(
                        "harness repro {}: the failure did NOT reproduce as expected: {problems}",
                        args.failure.name()
                    );
                    ExitCode::from(1)
                }
            }
        }
        Err(err) => {
            eprintln!("harness repro {}: {err:#}", args.failure.name());
            ExitCode::from(2)
        }
    }
}
