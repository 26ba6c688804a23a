//! `harness launch`.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> ExitCode {
    eprintln!("harness launch: not implemented yet");
    ExitCode::from(2)
}
