//! `harness bench matrix`: the wall time of every fake-app-server cell on this machine, the
//! per-cell medians, and how the wall time scales with the number of cells run at once.
//!
//! Each `--jobs` setting runs the whole fake matrix `--reps` times (the settings interleaved
//! per repetition, so a slow moment of the machine does not land on one setting only).

use anyhow::Result;
use matrix::concurrency::{default_jobs, Concurrency};
use matrix::context::CellContext;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use suites::spec::AppServerKind;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Parallelism settings to compare: a number of cells at once (`--jobs N` of `harness run`),
    /// or `default` (`harness run` without `--jobs`: cells weighed by kind).
    #[arg(long, value_delimiter = ',', default_value = "1,2,default", value_parser = parse_setting)]
    pub(crate) jobs: Vec<Concurrency>,
    /// Runs of the whole fake matrix per setting.
    #[arg(long, default_value_t = 3)]
    pub(crate) reps: usize,
    /// Only cells whose name contains one of these (default: every fake cell).
    pub(crate) filters: Vec<String>,
}

fn parse_setting(s: &str) -> Result<Concurrency, String> {
    if s == "default" {
        return Ok(Concurrency::weighed());
    }
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Concurrency::Cells(n)),
        _ => Err(format!(
            "`{s}` is neither a number of at least 1 nor `default`"
        )),
    }
}

fn label(setting: &Concurrency) -> String {
    match setting {
        Concurrency::Cells(n) => n.to_string(),
        Concurrency::Weighed { .. } => format!("default ({})", setting.describe()),
    }
}

#[derive(Debug, Serialize)]
struct JobsFigure {
    jobs: String,
    wall_ms: Vec<u64>,
    median_wall_ms: u64,
    /// `cells / median wall`.
    cells_per_second: f64,
    /// Median wall time at the first setting divided by this one's.
    speedup: f64,
}

#[derive(Debug, Serialize)]
struct BenchReport {
    machine_parallelism: usize,
    cells: usize,
    runnable_cells: usize,
    reps: usize,
    settings: Vec<JobsFigure>,
    /// Median duration of each cell over every run, in ms.
    per_cell_median_ms: BTreeMap<String, u64>,
    median_of_cell_medians_ms: u64,
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    match values.len() {
        0 => 0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2,
    }
}

/// One run of the matrix at one setting, told as it ends.
pub struct Rep {
    rep: usize,
    reps: usize,
    setting: String,
    wall: Duration,
    ran: usize,
    differ: usize,
}

impl std::fmt::Display for Rep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rep {}/{} jobs {}: {:.2} s ({} cells ran, {} differ from the baseline)",
            self.rep,
            self.reps,
            self.setting,
            self.wall.as_secs_f64(),
            self.ran,
            self.differ
        )
    }
}

/// The figures of a finished benchmark, and the folder its JSON belongs in.
pub struct Measured {
    report: BenchReport,
    out_root: PathBuf,
}

/// Run the fake matrix at each setting `--reps` times, handing each run to `progress` as it
/// ends.
pub fn run(args: Args, progress: &mut dyn FnMut(Rep)) -> Result<Measured> {
    anyhow::ensure!(args.reps >= 1, "--reps must be at least 1");
    anyhow::ensure!(!args.jobs.is_empty(), "--jobs needs a setting");
    let matrix = suites::load()?;
    let ctx = CellContext::from_env()?;
    let cells: Vec<suites::Cell> = matrix
        .select(&args.filters)
        .into_iter()
        .filter(|c| c.runner.app_server == AppServerKind::Fake)
        .cloned()
        .collect();
    anyhow::ensure!(!cells.is_empty(), "no fake cell matches");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut walls: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut per_cell: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut runnable = 0;
    for rep in 0..args.reps {
        for &jobs in &args.jobs {
            let setting = label(&jobs);
            let started = Instant::now();
            let results = super::run_cells(&runtime, &ctx, &cells, jobs);
            let wall = started.elapsed();
            runnable = results.iter().filter(|r| !r.is_ignored()).count();
            progress(Rep {
                rep: rep + 1,
                reps: args.reps,
                setting: setting.clone(),
                wall,
                ran: runnable,
                differ: results.iter().filter(|r| r.is_failure()).count(),
            });
            walls.entry(setting).or_default().push(millis(wall));
            for result in results.iter().filter(|r| !r.is_ignored()) {
                per_cell
                    .entry(result.cell.to_string())
                    .or_default()
                    .push(millis(result.duration));
            }
        }
    }
    let report = report(&args, cells.len(), runnable, walls, per_cell);
    Ok(Measured {
        report,
        out_root: ctx.out_root,
    })
}

/// The medians of the runs, each setting against the first.
fn report(
    args: &Args,
    cells: usize,
    runnable: usize,
    walls: BTreeMap<String, Vec<u64>>,
    per_cell: BTreeMap<String, Vec<u64>>,
) -> BenchReport {
    let base = label(&args.jobs[0]);
    let base_median = median(&mut walls[&base].clone()).max(1);
    let settings: Vec<JobsFigure> = args
        .jobs
        .iter()
        .map(|setting| {
            let jobs = label(setting);
            let wall_ms = walls[&jobs].clone();
            let median_wall_ms = median(&mut wall_ms.clone()).max(1);
            JobsFigure {
                jobs,
                cells_per_second: runnable as f64 / (median_wall_ms as f64 / 1000.0),
                speedup: base_median as f64 / median_wall_ms as f64,
                wall_ms,
                median_wall_ms,
            }
        })
        .collect();
    let per_cell_median_ms: BTreeMap<String, u64> = per_cell
        .into_iter()
        .map(|(cell, mut values)| (cell, median(&mut values)))
        .collect();
    BenchReport {
        machine_parallelism: default_jobs(),
        cells,
        runnable_cells: runnable,
        reps: args.reps,
        median_of_cell_medians_ms: median(
            &mut per_cell_median_ms.values().copied().collect::<Vec<_>>(),
        ),
        settings,
        per_cell_median_ms,
    }
}

impl Measured {
    /// The table as the command line prints it.
    pub fn render(&self) -> String {
        render(&self.report)
    }

    /// Write the figures as `bench-matrix.json` in the run's output folder; its path.
    pub fn save(&self) -> Result<PathBuf> {
        let path = self.out_root.join("bench-matrix.json");
        std::fs::create_dir_all(&self.out_root)?;
        std::fs::write(&path, serde_json::to_string_pretty(&self.report)? + "\n")?;
        Ok(path)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn render(report: &BenchReport) -> String {
    let mut text = format!(
        "fake matrix: {} cells ({} ran, {} cannot run here), {} reps, machine parallelism {}\n",
        report.cells,
        report.runnable_cells,
        report.cells - report.runnable_cells,
        report.reps,
        report.machine_parallelism
    );
    text += &format!(
        "| jobs | median wall (s) | all runs (s) | cells/s | speedup vs jobs {} |\n",
        report.settings[0].jobs
    );
    text += "| --- | --- | --- | --- | --- |\n";
    for s in &report.settings {
        let runs: Vec<String> = s
            .wall_ms
            .iter()
            .map(|ms| format!("{:.2}", *ms as f64 / 1000.0))
            .collect();
        text += &format!(
            "| {} | {:.2} | {} | {:.1} | {:.2}× |\n",
            s.jobs,
            s.median_wall_ms as f64 / 1000.0,
            runs.join(", "),
            s.cells_per_second,
            s.speedup
        );
    }
    text += &format!(
        "\nper-cell medians: median {} ms; slowest:\n",
        report.median_of_cell_medians_ms
    );
    let mut slowest: Vec<(&String, &u64)> = report.per_cell_median_ms.iter().collect();
    slowest.sort_by(|a, b| b.1.cmp(a.1));
    for (cell, ms) in slowest.iter().take(8) {
        text += &format!("  {ms:>6} ms  {cell}\n");
    }
    text
}
