//! `harness run`.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> ExitCode {
    eprintln!("harness run: not implemented yet");
    ExitCode::from(2)
}
