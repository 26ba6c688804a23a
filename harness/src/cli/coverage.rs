//! `harness coverage [--codex VERSION] [--json | --markdown]`: which cases of the `protocol`
//! profile make the app-server send each server request and notification of a release, and how
//! the fake answers each client request and which case checks how drivers use it
//! ([`crate::coverage`]). A table on the terminal, JSON for machines, Markdown for the docs;
//! under GitHub Actions the Markdown is also appended to the job summary. Exit 0; 2 when the
//! release has no protocol data here.

use std::io::Write;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Codex release whose protocol is covered (default: the pinned one the fake plays).
    #[arg(long = "codex", value_name = "VERSION")]
    pub codex: Option<String>,
    /// Print JSON instead of the table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the Markdown section (docs/coverage.md) instead of the table.
    #[arg(long)]
    pub markdown: bool,
}

pub fn main(args: Args) -> ExitCode {
    let release = args
        .codex
        .unwrap_or_else(|| fake_app_server::persona::DEFAULT_VERSION.to_string());
    let coverage = match crate::coverage::coverage(&release) {
        Ok(coverage) => coverage,
        Err(e) => {
            eprintln!("harness coverage: {e:#}");
            return ExitCode::from(2);
        }
    };
    let text = if args.json {
        serde_json::to_string_pretty(&coverage).unwrap_or_default() + "\n"
    } else if args.markdown {
        coverage.markdown()
    } else {
        coverage.table()
    };
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{}\n", coverage.markdown()).as_bytes()));
        if let Err(e) = appended {
            eprintln!("could not append to $GITHUB_STEP_SUMMARY: {e}");
        }
    }
    print!("{text}");
    ExitCode::SUCCESS
}
