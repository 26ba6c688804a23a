//! `harness bench tap`: what the wire tap costs. JSON-RPC requests answered per second on one
//! connection to the fake app-server, directly and through the tap (rounds interleaved, medians
//! side by side, target ≥ 90%), twice: latency-bound (one request in flight: every request pays
//! the tap's two extra pipe hops in full) and streaming (`--window` requests in flight, as a
//! driver meets a turn's stream of notifications); start-up with and without it; and its share
//! of a real-Codex cell's wall time (target < 2%), from a real cell's run: (the tap's start-up
//! overhead × the cell's launches + its per-line overhead × the cell's transcript lines) / the
//! cell's wall time.

use super::fake::{median, round_trips_through, startup_ms, RunDirs};
use crate::tap::{install, TapConfig, TapProgram};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Round trips per measurement.
    #[arg(long, default_value_t = 5_000)]
    pub round_trips: usize,
    /// Interleaved rounds per side (direct, tap).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Requests in flight in the streaming measurement.
    #[arg(long, default_value_t = 32)]
    pub window: usize,
    /// The real-Codex cell whose wall time the tap's share is taken of.
    #[arg(
        long,
        default_value = "core-compatibility.runner-codex.local.message-marker"
    )]
    pub codex_cell: String,
    /// Skip the real-Codex cell (where Codex cannot run).
    #[arg(long)]
    pub fake_only: bool,
    /// Write the report as JSON here as well.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub round_trips: usize,
    pub direct_per_second: Vec<f64>,
    pub tap_per_second: Vec<f64>,
    pub direct_median: f64,
    pub tap_median: f64,
    /// tap median / direct median.
    pub ratio: f64,
    /// The same with `window` requests in flight.
    pub window: usize,
    pub streaming_direct_per_second: Vec<f64>,
    pub streaming_tap_per_second: Vec<f64>,
    pub streaming_direct_median: f64,
    pub streaming_tap_median: f64,
    pub streaming_ratio: f64,
    pub direct_startup_ms: f64,
    pub tap_startup_ms: f64,
    pub codex_cell: Option<CodexShare>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CodexShare {
    pub cell: String,
    pub wall_ms: f64,
    pub launches: usize,
    pub transcript_lines: usize,
    /// The tap's estimated cost in that cell, and its share of the wall time.
    pub tap_ms: f64,
    pub share: f64,
}

pub fn main(args: Args) -> ExitCode {
    match run(&args) {
        Ok(report) => {
            print_report(&report);
            if let Some(path) = &args.json {
                if let Err(e) =
                    std::fs::write(path, serde_json::to_vec_pretty(&report).unwrap_or_default())
                {
                    eprintln!("harness bench tap: cannot write {}: {e}", path.display());
                    return ExitCode::from(1);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("harness bench tap: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn print_side_by_side(direct_median: f64, direct: &[f64], tap_median: f64, tap: &[f64]) {
    let rounded = |v: &[f64]| v.iter().map(|x| x.round()).collect::<Vec<_>>();
    println!(
        "  direct      : {direct_median:>9.0}/s  {:?}",
        rounded(direct)
    );
    println!("  through tap : {tap_median:>9.0}/s  {:?}", rounded(tap));
    println!(
        "  ratio       : {:>9.1}% (target ≥ 90%)",
        tap_median / direct_median * 100.0
    );
}

fn print_report(r: &Report) {
    println!(
        "requests on one connection to the fake, {} per measurement, medians; one in flight (latency-bound):",
        r.round_trips
    );
    print_side_by_side(
        r.direct_median,
        &r.direct_per_second,
        r.tap_median,
        &r.tap_per_second,
    );
    println!("{} in flight (streaming):", r.window);
    print_side_by_side(
        r.streaming_direct_median,
        &r.streaming_direct_per_second,
        r.streaming_tap_median,
        &r.streaming_tap_per_second,
    );
    println!(
        "spawn → initialize → thread/start: direct {:.2} ms, through tap {:.2} ms",
        r.direct_startup_ms, r.tap_startup_ms
    );
    match &r.codex_cell {
        Some(c) => println!(
            "real-Codex cell {}: {:.0} ms wall, {} launch(es), {} transcript lines: tap ≈ {:.2} ms = {:.2}% (target < 2%)",
            c.cell, c.wall_ms, c.launches, c.transcript_lines, c.tap_ms, c.share * 100.0
        ),
        None => println!("real-Codex cell: (skipped)"),
    }
}

fn tapped(scratch: &Path, harness: &Path, dirs_env: &[(String, String)]) -> Result<PathBuf> {
    let tap = TapProgram {
        program: harness.to_path_buf(),
        leading_args: vec!["tap".into()],
    };
    let config = TapConfig {
        program: harness.to_path_buf(),
        prefix: vec!["fake-app-server".into()],
        server_args: Vec::new(),
        env: dirs_env.to_vec(),
        transcript: scratch.join("transcript.jsonl"),
        launches: scratch.join("tap").join("launches"),
        max_line_bytes: crate::tap::MAX_RECORDED_LINE_BYTES,
        max_transcript_bytes: crate::tap::MAX_TRANSCRIPT_BYTES_PER_LAUNCH,
    };
    Ok(install(&scratch.join("tap"), &tap, &config, None)?.codex)
}

pub fn run(args: &Args) -> Result<Report> {
    if args.rounds == 0 || args.round_trips == 0 || args.window == 0 {
        bail!("--rounds, --round-trips and --window must be at least 1");
    }
    let scratch = tempfile::Builder::new().prefix("bench-tap-").tempdir()?;
    let workspace = scratch.path().join("ws");
    std::fs::create_dir_all(&workspace)?;
    let harness = std::env::current_exe().context("locating the harness binary")?;
    let env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        (
            "HOME".to_string(),
            scratch.path().join("home").display().to_string(),
        ),
        (
            "TMPDIR".to_string(),
            scratch.path().join("tmp").display().to_string(),
        ),
    ];
    let shim = tapped(scratch.path(), &harness, &env)?;
    let direct = || {
        let mut c = Command::new(&harness);
        c.args(["fake-app-server", "app-server"]);
        c
    };
    let through = || {
        let mut c = Command::new(&shim);
        c.arg("app-server");
        c
    };
    let (mut direct_rt, mut tap_rt, mut direct_up, mut tap_up) = (vec![], vec![], vec![], vec![]);
    let (mut direct_stream, mut tap_stream) = (vec![], vec![]);
    for round in 0..args.rounds {
        let base = round * 6;
        let dirs = RunDirs::create(scratch.path(), base)?;
        direct_rt.push(round_trips_through(
            direct(),
            &workspace,
            &dirs,
            args.round_trips,
            1,
        )?);
        let dirs = RunDirs::create(scratch.path(), base + 1)?;
        tap_rt.push(round_trips_through(
            through(),
            &workspace,
            &dirs,
            args.round_trips,
            1,
        )?);
        let dirs = RunDirs::create(scratch.path(), base + 2)?;
        direct_stream.push(round_trips_through(
            direct(),
            &workspace,
            &dirs,
            args.round_trips,
            args.window,
        )?);
        let dirs = RunDirs::create(scratch.path(), base + 3)?;
        tap_stream.push(round_trips_through(
            through(),
            &workspace,
            &dirs,
            args.round_trips,
            args.window,
        )?);
        let dirs = RunDirs::create(scratch.path(), base + 4)?;
        direct_up.push(startup_ms(direct(), &workspace, &dirs)?);
        let dirs = RunDirs::create(scratch.path(), base + 5)?;
        tap_up.push(startup_ms(through(), &workspace, &dirs)?);
    }
    let (streaming_direct_median, streaming_tap_median) =
        (median(&direct_stream), median(&tap_stream));
    let (direct_median, tap_median) = (median(&direct_rt), median(&tap_rt));
    let (direct_startup_ms, tap_startup_ms) = (median(&direct_up), median(&tap_up));
    let codex_cell = if args.fake_only {
        None
    } else {
        // Per line: half the added cost of a round trip (one line each way).
        let per_line_ms = ((1000.0 / tap_median) - (1000.0 / direct_median)).max(0.0) / 2.0;
        let startup_overhead_ms = (tap_startup_ms - direct_startup_ms).max(0.0);
        Some(codex_share(
            &args.codex_cell,
            per_line_ms,
            startup_overhead_ms,
        )?)
    };
    Ok(Report {
        round_trips: args.round_trips,
        direct_per_second: direct_rt,
        tap_per_second: tap_rt,
        direct_median,
        tap_median,
        ratio: tap_median / direct_median,
        window: args.window,
        streaming_direct_per_second: direct_stream,
        streaming_tap_per_second: tap_stream,
        streaming_direct_median,
        streaming_tap_median,
        streaming_ratio: streaming_tap_median / streaming_direct_median,
        direct_startup_ms,
        tap_startup_ms,
        codex_cell,
    })
}

fn codex_share(name: &str, per_line_ms: f64, startup_overhead_ms: f64) -> Result<CodexShare> {
    let matrix = suites::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    let cell = matrix
        .cell(name)
        .with_context(|| format!("no cell `{name}`"))?
        .clone();
    let options = crate::matrix::MatrixOptions::from_env()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(crate::matrix::run_cell(&cell, &options));
    if result.verdict().is_none() {
        bail!(
            "the cell `{name}` produced no verdict: {:?}",
            result.outcome
        );
    }
    let transcript = std::fs::read_to_string(result.evidence_dir.join("transcript.jsonl"))?;
    let launches = transcript
        .lines()
        .filter(|l| l.contains("\"kind\":\"launch\""))
        .count();
    let lines = transcript
        .lines()
        .filter(|l| l.starts_with("{\"direction\""))
        .count();
    let wall_ms = result.duration.as_secs_f64() * 1000.0;
    let tap_ms = startup_overhead_ms * launches as f64 + per_line_ms * lines as f64;
    Ok(CodexShare {
        cell: name.into(),
        wall_ms,
        launches,
        transcript_lines: lines,
        tap_ms,
        share: tap_ms / wall_ms,
    })
}
