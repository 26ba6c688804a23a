//! `harness env`.

use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// List the environments.
    List,
}

pub fn main(_cmd: Command) -> ExitCode {
    eprintln!("harness env: not implemented yet");
    ExitCode::from(2)
}
