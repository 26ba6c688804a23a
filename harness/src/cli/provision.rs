//! `harness provision [VERSION…]`: install the pinned Codex versions into the cache (the same
//! code path the real-Codex runners use on first use), and print where each binary is.

use crate::codex::provision;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Versions of `@openai/codex` (default: the pinned ones).
    pub versions: Vec<String>,
}

pub fn main(args: Args) -> ExitCode {
    let versions = if args.versions.is_empty() {
        vec![provision::PINNED.to_string(), provision::SECOND.to_string()]
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
