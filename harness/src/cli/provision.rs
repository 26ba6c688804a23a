//! `harness provision [VERSION…] [--driver ID…]`: install Codex versions and the published
//! drivers the matrix runs (`codex::driver_packages`) into the cache (the same code
//! paths the cells use on first use), and print where each one is. With neither versions nor
//! `--driver`: every `codex_version` the matrix's runners name, and every pinned driver.

use codex::{driver_packages, provision};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Versions of `@openai/codex` (default: every version the matrix's runners use).
    #[arg(value_parser = super::codex_version)]
    pub versions: Vec<String>,
    /// Published driver packages to install (`python-sdk`, `codex-acp`; repeatable). Default:
    /// all of them when no Codex version is named, none otherwise.
    #[arg(long = "driver")]
    pub drivers: Vec<String>,
}

pub fn main(args: Args) -> ExitCode {
    let everything = args.versions.is_empty() && args.drivers.is_empty();
    let versions = if everything {
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
    let packages = if everything {
        driver_packages::ALL.to_vec()
    } else {
        match args
            .drivers
            .iter()
            .map(|id| driver_packages::by_id(id))
            .collect()
        {
            Ok(packages) => packages,
            Err(e) => {
                eprintln!("harness provision: {e:#}");
                return ExitCode::from(2);
            }
        }
    };
    for package in packages {
        if let Some(missing) = package.runtime_missing() {
            eprintln!("driver {}: {missing}", package.id);
            failed = true;
            continue;
        }
        match package.ensure() {
            Ok(installed) => println!(
                "driver {} ({} {}): {}",
                package.id,
                package.package,
                package.version,
                installed.entry.display()
            ),
            Err(e) => {
                eprintln!("driver {} ({}): {e:#}", package.id, package.package);
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
