//! `harness report [--out DIR] DIR [DIR…]`: rebuild report.html, matrix.md, junit.xml and
//! summary.json from one evidence folder (one `harness run` wrote, maybe downloaded from CI), or
//! merge several shards' folders (`harness run --partition K/N`) into one report; with
//! `--complete`, the folder the suites' `cells` test binary filled (every cell of the matrix must
//! be there). Exit 0 when
//! every cell matches its expectation, 1 when any differs, 2 when the folders cannot be read.

use report::{self, folders};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Evidence folders: each holds a summary.json and/or one folder per cell.
    #[arg(required = true, value_name = "DIR", value_parser = super::absolute_path)]
    pub dirs: Vec<PathBuf>,
    /// Where the reports go (default: the folder itself when there is one; required when
    /// merging several).
    #[arg(long, value_name = "DIR", value_parser = super::absolute_path)]
    pub out: Option<PathBuf>,
    /// The drivers file the run used (as `harness run --drivers`), so its cells are reported
    /// in matrix order too; its programs need not exist on this machine.
    #[arg(long, env = matrix::load::DRIVERS_VAR, value_name = "FILE", value_parser = super::absolute_path)]
    pub drivers: Option<PathBuf>,
    /// The extra Codex versions the run used (as `harness run --codex`).
    #[arg(long = "codex", value_name = "VERSION")]
    pub codex_versions: Vec<String>,
    /// The folders must hold every cell of the matrix (with --drivers and --codex): a cell they
    /// do not hold is an error cell, a not-applicable one is reported as such. For the folder
    /// the suites' `cells` test binary fills (`cargo test -p suites`), which writes no
    /// summary.json and skips the not-applicable cells.
    #[arg(long)]
    pub complete: bool,
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness report: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let out = match (&args.out, args.dirs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [only]) => only.clone(),
        (None, _) => anyhow::bail!(
            "merging {} folders needs --out DIR (where the merged reports go)",
            args.dirs.len()
        ),
    };
    // The matrix's order (with the run's drivers file and Codex versions), so merged shards
    // read like one run; cells it does not know keep the order they were found in.
    let extras = suites::Extras {
        drivers: args
            .drivers
            .as_deref()
            .map(suites::DriversFile::read)
            .transpose()?,
        codex_versions: args.codex_versions.clone(),
    };
    let matrix = suites::load_with(&extras)?;
    let loaded = if args.complete {
        folders::load_complete(&args.dirs, &matrix.cells)?
    } else {
        let known: Vec<String> = matrix.cells.iter().map(|c| c.name()).collect();
        folders::load(&args.dirs, &known)?
    };
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    let paths = report::write_summary(&out, &loaded.summary)?;
    let markdown = std::fs::read_to_string(&paths.markdown)?;
    println!("{markdown}");
    if let Err(why) = report::append_job_summary(&markdown) {
        eprintln!("{why}");
    }
    eprintln!(
        "reports of {} cells from {} folder(s):",
        loaded.summary.totals.cells,
        args.dirs.len()
    );
    eprintln!("  html:     {}", paths.html.display());
    eprintln!("  markdown: {}", paths.markdown.display());
    eprintln!("  junit:    {}", paths.junit.display());
    eprintln!("  json:     {}", paths.json.display());
    if loaded.summary.totals.flaky > 0 {
        eprintln!(
            "{} cells were flaky (failed, then as expected when run again; see matrix.md)",
            loaded.summary.totals.flaky
        );
    }
    Ok(if loaded.summary.totals.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "{} cells differ from their expectation",
            loaded.summary.totals.failures()
        );
        ExitCode::from(1)
    })
}
