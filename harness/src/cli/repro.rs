//! `harness repro`.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> ExitCode {
    eprintln!("harness repro: not implemented yet");
    ExitCode::from(2)
}
