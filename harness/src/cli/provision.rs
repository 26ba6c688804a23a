//! `harness provision [VERSION…]`: install Codex versions into the cache (the same code path the
//! real-Codex runners use on first use), and print where each binary is. Without versions: every
//! `codex_version` the matrix's runners name, so a new runner is provisioned without code changes.

use crate::codex::provision;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Versions of `@openai/codex` (default: every version the matrix's runners use).
    pub versions: Vec<String>,
}

pub fn main(args: Args) -> ExitCode {
    let versions = if args.versions.is_empty() {
        match matrix_versions() {
            Ok(versions) => versions,
            Err(e) => {
                eprintln!("harness provision: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        args.versions
    };
    let mut failed = false;
    for version in versions {
        match provision::ensure(&version) {
            Ok(install) => println!("codex {version}: {}", install.binary.display()),
            Err(e) => {
                eprintln!("codex {version}: {e:#}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn matrix_versions() -> Result<Vec<String>, String> {
    let matrix = suites::load().map_err(|e| e.to_string())?;
    Ok(provision::matrix_versions(&matrix))
}
