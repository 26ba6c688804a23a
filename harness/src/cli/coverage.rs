//! `harness coverage [--codex VERSION] [--json | --markdown]`: which cases of the `protocol`
//! profile make the app-server send each server request and notification of a release, and how
//! the fake answers each client request and which case checks how drivers use it
//! ([`maintainer_tools::coverage`]). With `--drivers FILE [--out DIR]`: what each driver of the file was
//! exercised on in the run whose evidence is in DIR, beside that
//! ([`maintainer_tools::coverage::by_driver`]). A table on the terminal, JSON for machines, Markdown for
//! the docs; under GitHub Actions the Markdown is also appended to the job summary. Exit 0; 1
//! when a driver of the file has no cell in the folder that recorded a transcript; 2 when the
//! release has no protocol data here, or the drivers file or the evidence cannot be read.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Codex release whose protocol is covered (default: the pinned one the fake plays).
    #[arg(long = "codex", value_name = "VERSION", conflicts_with = "drivers")]
    pub codex: Option<String>,
    /// A drivers file: say what each of its drivers was exercised on in a run's evidence
    /// (`--out`), per app-server, beside what the profile covers.
    #[arg(long, value_name = "FILE", value_parser = super::absolute_path)]
    pub drivers: Option<PathBuf>,
    /// With `--drivers`: the run's evidence folder (default: `$HARNESS_OUT_DIR`, else
    /// `target/conformance`, as `harness run` writes it).
    #[arg(long, value_name = "DIR", requires = "drivers", value_parser = super::absolute_path)]
    pub out: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the Markdown section (docs/coverage.md) instead of the table.
    #[arg(long)]
    pub markdown: bool,
}

/// What is printed, in each form.
struct Printed {
    table: String,
    json: String,
    markdown: String,
}

pub fn main(args: Args) -> ExitCode {
    let (printed, code) = match &args.drivers {
        Some(drivers) => {
            let out = args
                .out
                .clone()
                .unwrap_or_else(matrix::paths::conformance_root);
            match maintainer_tools::coverage::by_driver::exercised(drivers, &out) {
                Ok(exercised) => {
                    let unrecorded = exercised.unrecorded();
                    for driver in &unrecorded {
                        eprintln!(
                            "harness coverage: {}",
                            driver.nothing_recorded.as_deref().unwrap_or_default()
                        );
                    }
                    let code = if unrecorded.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    };
                    let printed = Printed {
                        table: exercised.table(),
                        json: serde_json::to_string_pretty(&exercised).unwrap_or_default() + "\n",
                        markdown: exercised.markdown(),
                    };
                    (printed, code)
                }
                Err(e) => {
                    eprintln!("harness coverage: {e:#}");
                    return ExitCode::from(2);
                }
            }
        }
        None => {
            let release = args
                .codex
                .clone()
                .unwrap_or_else(|| fake_app_server::persona::DEFAULT_VERSION.to_string());
            match maintainer_tools::coverage::coverage(&release) {
                Ok(coverage) => (
                    Printed {
                        table: coverage.table(),
                        json: serde_json::to_string_pretty(&coverage).unwrap_or_default() + "\n",
                        markdown: coverage.markdown(),
                    },
                    ExitCode::SUCCESS,
                ),
                Err(e) => {
                    eprintln!("harness coverage: {e:#}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{}\n", printed.markdown).as_bytes()));
        if let Err(e) = appended {
            eprintln!("could not append to $GITHUB_STEP_SUMMARY: {e}");
        }
    }
    let text = if args.json {
        printed.json
    } else if args.markdown {
        printed.markdown
    } else {
        printed.table
    };
    print!("{text}");
    code
}
