//! `harness bench tap`: what the wire tap costs. JSON-RPC requests answered per second on one
//! connection, directly and through the tap (rounds interleaved, medians side by side, target
//! ≥ 90%), to two app-servers: the fake (the worst case: it answers in a few µs, faster than any
//! relay's two extra pipe hops) and the pinned real Codex (the app-server the tap stands in
//! front of where it matters). Each twice: latency-bound (one request in flight: every request
//! pays the hops in full) and streaming (`--window` requests in flight, as a driver meets a
//! turn's stream of notifications). Also start-up with and without the tap, and its share of a
//! real-Codex cell's wall time (target < 2%), from a real cell's run: (the tap's start-up
//! overhead × the cell's launches + its per-line overhead × the cell's transcript lines) / the
//! cell's wall time.

use super::fake::{median, round_trips_through, startup_ms, RunDirs};
use anyhow::{bail, Context, Result};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tap::session::{AppServerSetup, HostSpawn, Recording};
use tap::{install, TapProgram};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Round trips per measurement against the fake.
    #[arg(long, default_value_t = 5_000)]
    pub(crate) round_trips: usize,
    /// Round trips per measurement against the real Codex (it answers in ~0.5 ms).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) codex_round_trips: usize,
    /// Interleaved rounds per side (direct, tap).
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Requests in flight in the streaming measurement.
    #[arg(long, default_value_t = 32)]
    pub(crate) window: usize,
    /// The real-Codex cell whose wall time the tap's share is taken of.
    #[arg(
        long,
        default_value = "core-compatibility.runner-codex.local.message-marker"
    )]
    pub(crate) codex_cell: String,
    /// Only the fake: skip the real Codex and its cell (where Codex cannot run).
    #[arg(long)]
    pub(crate) fake_only: bool,
    /// Write the report as JSON here as well.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One measurement, directly and through the tap.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Pair {
    pub(crate) direct_per_second: Vec<f64>,
    pub(crate) tap_per_second: Vec<f64>,
    pub(crate) direct_median: f64,
    pub(crate) tap_median: f64,
    /// tap median / direct median.
    pub(crate) ratio: f64,
}

impl Pair {
    fn new(direct: Vec<f64>, tap: Vec<f64>) -> Self {
        let (direct_median, tap_median) = (median(&direct), median(&tap));
        Self {
            direct_per_second: direct,
            tap_per_second: tap,
            direct_median,
            tap_median,
            ratio: tap_median / direct_median,
        }
    }
}

/// Round trips to one app-server.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Server {
    pub(crate) round_trips: usize,
    /// One request in flight.
    pub(crate) latency_bound: Pair,
    /// `window` requests in flight.
    pub(crate) streaming: Pair,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub(crate) window: usize,
    pub(crate) fake: Server,
    pub(crate) codex: Option<Server>,
    pub(crate) direct_startup_ms: f64,
    pub(crate) tap_startup_ms: f64,
    pub(crate) codex_cell: Option<CodexShare>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct CodexShare {
    pub(crate) cell: String,
    pub(crate) wall_ms: f64,
    pub(crate) launches: usize,
    pub(crate) transcript_lines: usize,
    /// The tap's estimated cost in that cell, and its share of the wall time.
    pub(crate) tap_ms: f64,
    pub(crate) share: f64,
}

fn render_pair(text: &mut String, title: &str, pair: &Pair) {
    let rounded = |v: &[f64]| v.iter().map(|x| x.round()).collect::<Vec<_>>();
    *text += &format!("  {title}:\n");
    *text += &format!(
        "    direct      : {:>9.0}/s  {:?}\n",
        pair.direct_median,
        rounded(&pair.direct_per_second)
    );
    *text += &format!(
        "    through tap : {:>9.0}/s  {:?}\n",
        pair.tap_median,
        rounded(&pair.tap_per_second)
    );
    *text += &format!(
        "    ratio       : {:>9.1}% (target ≥ 90%)\n",
        pair.ratio * 100.0
    );
}

fn render_server(text: &mut String, name: &str, server: &Server, window: usize) {
    *text += &format!(
        "{name}: requests answered per second on one connection, {} per measurement, medians\n",
        server.round_trips
    );
    render_pair(text, "one in flight (latency-bound)", &server.latency_bound);
    render_pair(
        text,
        &format!("{window} in flight (streaming)"),
        &server.streaming,
    );
}

/// The report as the command line prints it.
pub fn render(r: &Report) -> String {
    let mut text = String::new();
    render_server(&mut text, "the fake", &r.fake, r.window);
    match &r.codex {
        Some(codex) => render_server(&mut text, "the real Codex", codex, r.window),
        None => text += "the real Codex: (skipped)\n",
    }
    text += &format!(
        "spawn → initialize → thread/start (the fake): direct {:.2} ms, through tap {:.2} ms\n",
        r.direct_startup_ms, r.tap_startup_ms
    );
    match &r.codex_cell {
        Some(c) => text += &format!(
            "real-Codex cell {}: {:.0} ms wall, {} launch(es), {} transcript lines: tap ≈ {:.2} ms = {:.2}% (target < 2%)\n",
            c.cell, c.wall_ms, c.launches, c.transcript_lines, c.tap_ms, c.share * 100.0
        ),
        None => text += "real-Codex cell: (skipped)\n",
    }
    text
}

/// A `codex` shim whose tap relays to `program prefix…` through the harness's recorder (this
/// process, as in a cell): each command gets a recording of its own, so no run's transcript
/// reaches the recorder's bounds because of the runs before it.
struct Tapped {
    dir: PathBuf,
    tap: TapProgram,
    setup: AppServerSetup,
    runs: RefCell<(usize, Option<Recording>)>,
}

impl Tapped {
    fn new(
        dir: &Path,
        harness: &Path,
        program: &Path,
        prefix: &[&str],
        env: &[(String, String)],
    ) -> Self {
        Self {
            dir: dir.to_path_buf(),
            tap: TapProgram {
                program: harness.to_path_buf(),
                leading_args: vec!["tap".into()],
            },
            setup: AppServerSetup {
                program: program.to_path_buf(),
                prefix: prefix.iter().map(|s| s.to_string()).collect(),
                server_args: Vec::new(),
                env: env.to_vec(),
                inherit_env: Vec::new(),
            },
            runs: RefCell::new((0, None)),
        }
    }

    /// The shim of a fresh recording (the previous one is finished), running `codex args…`.
    fn command(&self, args: &[&str]) -> Result<Command> {
        let mut runs = self.runs.borrow_mut();
        if let Some(previous) = runs.1.take() {
            previous.finish(std::time::Duration::from_secs(5));
        }
        runs.0 += 1;
        let dir = self.dir.join(format!("run-{}", runs.0));
        let installed = install(&dir.join("tap"), &self.tap)?;
        let recording = Recording::start(
            &installed.socket,
            &dir.join("transcript.jsonl"),
            self.setup.clone(),
            Arc::new(HostSpawn),
        )?;
        runs.1 = Some(recording);
        let mut command = Command::new(&installed.codex);
        command.args(args);
        Ok(command)
    }
}

/// Folders for the runs of one bench: each run gets a fresh HOME and TMPDIR.
struct Runs<'a> {
    scratch: &'a Path,
    workspace: PathBuf,
    next: usize,
}

impl Runs<'_> {
    fn dirs(&mut self) -> Result<RunDirs> {
        self.next += 1;
        RunDirs::create(self.scratch, self.next)
    }
}

/// `count` requests directly and through the tap, one in flight and `window` in flight, the
/// four interleaved per round.
fn measure(
    runs: &mut Runs,
    direct: &dyn Fn() -> Result<Command>,
    through: &dyn Fn() -> Result<Command>,
    count: usize,
    args: &Args,
) -> Result<Server> {
    let (mut direct_rt, mut tap_rt, mut direct_stream, mut tap_stream) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..args.rounds {
        for (command, window, out) in [
            (direct, 1, &mut direct_rt),
            (through, 1, &mut tap_rt),
            (direct, args.window, &mut direct_stream),
            (through, args.window, &mut tap_stream),
        ] {
            let dirs = runs.dirs()?;
            out.push(round_trips_through(
                command()?,
                &runs.workspace,
                &dirs,
                count,
                window,
            )?);
        }
    }
    Ok(Server {
        round_trips: count,
        latency_bound: Pair::new(direct_rt, tap_rt),
        streaming: Pair::new(direct_stream, tap_stream),
    })
}

pub fn run(args: &Args) -> Result<Report> {
    if args.rounds == 0 || args.round_trips == 0 || args.codex_round_trips == 0 || args.window == 0
    {
        bail!("--rounds, --round-trips, --codex-round-trips and --window must be at least 1");
    }
    let scratch = tempfile::Builder::new().prefix("bench-tap-").tempdir()?;
    let mut runs = Runs {
        scratch: scratch.path(),
        workspace: scratch.path().join("ws"),
        next: 0,
    };
    std::fs::create_dir_all(&runs.workspace)?;
    let harness = std::env::current_exe().context("locating the harness binary")?;
    let env = environment(scratch.path())?;
    let (fake, direct_startup_ms, tap_startup_ms) = measure_fake(&mut runs, &harness, &env, args)?;
    let mut report = Report {
        window: args.window,
        fake,
        codex: None,
        direct_startup_ms,
        tap_startup_ms,
        codex_cell: None,
    };
    if args.fake_only {
        return Ok(report);
    }
    report.codex = Some(measure_codex(&mut runs, &harness, &env, args)?);
    // Per line: half the added cost of a round trip (one line each way), against the fake,
    // where the hops show most.
    let per_line_ms = ((1000.0 / report.fake.latency_bound.tap_median)
        - (1000.0 / report.fake.latency_bound.direct_median))
        .max(0.0)
        / 2.0;
    let startup_overhead_ms = (tap_startup_ms - direct_startup_ms).max(0.0);
    report.codex_cell = Some(codex_share(
        &args.codex_cell,
        per_line_ms,
        startup_overhead_ms,
    )?);
    Ok(report)
}

/// The app-servers' environment: a plain PATH and a HOME, CODEX_HOME and TMPDIR of their own
/// under `scratch`, made.
fn environment(scratch: &Path) -> Result<Vec<(String, String)>> {
    let env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        (
            "HOME".to_string(),
            scratch.join("home").display().to_string(),
        ),
        (
            "CODEX_HOME".to_string(),
            scratch.join("home").display().to_string(),
        ),
        (
            "TMPDIR".to_string(),
            scratch.join("tmp").display().to_string(),
        ),
    ];
    for (_, dir) in &env[1..] {
        std::fs::create_dir_all(dir)?;
    }
    Ok(env)
}

/// Round trips to the fake, then its start-up, directly and through the tap: the round trips
/// and the median start-ups in ms (direct, tap).
fn measure_fake(
    runs: &mut Runs,
    harness: &Path,
    env: &[(String, String)],
    args: &Args,
) -> Result<(Server, f64, f64)> {
    let fake_tap = Tapped::new(
        &runs.scratch.join("fake"),
        harness,
        harness,
        &["fake-app-server"],
        env,
    );
    let direct = || {
        let mut c = Command::new(harness);
        c.args(["fake-app-server", "app-server"]);
        Ok(c)
    };
    let through = || fake_tap.command(&["app-server"]);
    let fake = measure(runs, &direct, &through, args.round_trips, args)?;
    let (mut direct_up, mut tap_up) = (vec![], vec![]);
    for _ in 0..args.rounds {
        let dirs = runs.dirs()?;
        direct_up.push(startup_ms(direct()?, &runs.workspace, &dirs)?);
        let dirs = runs.dirs()?;
        tap_up.push(startup_ms(through()?, &runs.workspace, &dirs)?);
    }
    Ok((fake, median(&direct_up), median(&tap_up)))
}

/// Round trips to the pinned real Codex, directly and through the tap.
fn measure_codex(
    runs: &mut Runs,
    harness: &Path,
    env: &[(String, String)],
    args: &Args,
) -> Result<Server> {
    let install = codex::provision::resolve(codex::provision::PINNED)?;
    let codex_tap = Tapped::new(
        &runs.scratch.join("codex"),
        harness,
        &install.binary,
        &[],
        env,
    );
    let codex_direct = || {
        let mut c = Command::new(&install.binary);
        c.arg("app-server");
        Ok(c)
    };
    let codex_through = || codex_tap.command(&["app-server"]);
    measure(
        runs,
        &codex_direct,
        &codex_through,
        args.codex_round_trips,
        args,
    )
}

fn codex_share(name: &str, per_line_ms: f64, startup_overhead_ms: f64) -> Result<CodexShare> {
    let matrix = suites::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    let cell = matrix
        .cell(name)
        .with_context(|| format!("no cell `{name}`"))?
        .clone();
    let ctx = matrix::context::CellContext::from_env()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(matrix::cell::run_cell(&ctx, &cell));
    if result.verdict().is_none() {
        bail!(
            "the cell `{name}` produced no verdict: {:?}",
            result.outcome
        );
    }
    // Read as every reader reads it: compressed once the cell was graded.
    let path = report::layout::CellEvidence::new(&result.evidence_dir).transcript();
    let bytes = graders::evidence_file::read(&path, graders::evidence_file::MAX_STREAMED_BYTES)?
        .with_context(|| format!("the cell left no transcript at {}", path.display()))?;
    let transcript = String::from_utf8_lossy(&bytes);
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
