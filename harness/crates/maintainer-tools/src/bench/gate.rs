//! `harness bench gate --drivers FILE`: what the harness costs a driver's PR gate. The gate is
//! the driver's fake cells in every environment, run as `harness run --drivers FILE` runs them
//! (its default concurrency); against it, the same sessions of that driver run directly
//! against the fake — the driver's command with `codex` standing for the fake app-server, no
//! tap, no container, no grading — two at a time. The ratio of the two wall times, in one run,
//! is the figure of issue 24 (target 1.5×).
//!
//! A direct session is prepared the way the cell is (its folders, task envelope, scenario and
//! the fake's arguments, from the same stages), before the clock starts; only the sessions are
//! timed. What the harness tells a driver beyond the wire (interrupt, steer) is not told in a
//! direct session: such a cell's direct session is its driver left alone.

use anyhow::{bail, Context, Result};
use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use matrix::stages::{app_server, driver, folders};
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use suites::declared::Placeholders;
use suites::spec::{AppServerKind, CodexDiscovery};
use suites::Cell;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The drivers file declaring the driver, as `harness run --drivers` takes it.
    #[arg(long)]
    pub(crate) drivers: PathBuf,
    /// The driver to measure, when the file declares more than one.
    #[arg(long)]
    pub(crate) driver: Option<String>,
    /// Direct sessions run at once.
    #[arg(long, default_value_t = 2)]
    pub(crate) direct_jobs: usize,
    /// Only the driver's fake cells whose name contains one of these (default: all of them).
    pub(crate) filters: Vec<String>,
}

#[derive(Debug, Serialize)]
struct GateReport {
    driver: String,
    /// The gate's cells: every fake cell of the driver, in every environment.
    cells: usize,
    /// Of those, the ones that ran a session (not "not applicable", not ignored).
    sessions: usize,
    local_sessions: usize,
    not_applicable: usize,
    ignored: usize,
    /// Cells whose verdict differs from the baseline (a benchmark still, not a gate).
    differ_from_baseline: usize,
    concurrency: String,
    gate_wall_ms: u64,
    direct_jobs: usize,
    direct_wall_ms: u64,
    /// Direct sessions that did not exit 0 (a driver's own verdict on a broken session).
    direct_nonzero: usize,
    /// `gate_wall_ms / direct_wall_ms`.
    ratio: f64,
    /// `/proc/loadavg` when the run began.
    load: String,
    /// Each session's wall time in the gate and directly, in ms, slowest in the gate first.
    per_session_ms: Vec<(String, u64, u64)>,
}

/// What the benchmark tells as it measures, before its report.
pub enum Progress {
    /// The gate is about to run.
    Gate {
        cells: usize,
        driver: String,
        concurrency: String,
    },
    /// The gate ran; the direct sessions are next.
    Direct {
        gate_wall: Duration,
        sessions: usize,
    },
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Progress::Gate {
                cells,
                driver,
                concurrency,
            } => write!(
                f,
                "the gate: {cells} fake cells of `{driver}`, {concurrency}"
            ),
            Progress::Direct {
                gate_wall,
                sessions,
            } => write!(
                f,
                "the gate: {:.2} s; preparing {sessions} direct sessions",
                gate_wall.as_secs_f64()
            ),
        }
    }
}

/// The figures of a finished benchmark, and the folder its files belong in.
pub struct Measured {
    report: GateReport,
    bench_root: PathBuf,
}

impl Measured {
    /// The report as Markdown: what the command line prints and the job summary gets.
    pub fn render(&self) -> String {
        markdown(&self.report)
    }

    /// Write `bench-gate.json` and `bench-gate.md` under `<out>/bench-gate/`; the JSON's path.
    pub fn save(&self) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.bench_root)?;
        let json = self.bench_root.join("bench-gate.json");
        std::fs::write(&json, serde_json::to_string_pretty(&self.report)? + "\n")?;
        std::fs::write(self.bench_root.join("bench-gate.md"), self.render())?;
        Ok(json)
    }
}

/// Run the driver's gate, then the same sessions directly; `progress` hears of each step.
pub fn run(args: &Args, progress: &mut dyn FnMut(Progress)) -> Result<Measured> {
    anyhow::ensure!(args.direct_jobs >= 1, "--direct-jobs must be at least 1");
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string();
    let base_ctx = CellContext::from_env()?;
    let name = driver_name(args)?;
    let cells = gate_cells(args, &name, &base_ctx)?;
    let bench_root = base_ctx.out_root.join("bench-gate");
    let gate_ctx = CellContext {
        out_root: bench_root.join("gate"),
        ..base_ctx.clone()
    };
    let direct_ctx = CellContext {
        out_root: bench_root.join("direct"),
        ..base_ctx.clone()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let concurrency = Concurrency::weighed();
    progress(Progress::Gate {
        cells: cells.len(),
        driver: name.clone(),
        concurrency: concurrency.describe(),
    });
    let started = Instant::now();
    let results = super::run_cells(&runtime, &gate_ctx, &cells, concurrency);
    let gate_wall = started.elapsed();
    let (ran, gate_ms): (Vec<&Cell>, Vec<u64>) = cells
        .iter()
        .zip(&results)
        .filter(|(_, r)| !r.is_ignored() && !r.is_not_applicable())
        .map(|(c, r)| (c, millis(r.duration)))
        .unzip();
    progress(Progress::Direct {
        gate_wall,
        sessions: ran.len(),
    });
    let sessions = runtime.block_on(prepare_all(&direct_ctx, &ran))?;
    let started = Instant::now();
    let exits = runtime.block_on(run_direct(sessions, args.direct_jobs))?;
    let direct_wall = started.elapsed();
    let mut per_session_ms: Vec<(String, u64, u64)> = ran
        .iter()
        .zip(gate_ms)
        .zip(&exits)
        .map(|((cell, gate), (_, direct))| (cell.name(), gate, *direct))
        .collect();
    per_session_ms.sort_by_key(|(_, gate, _)| std::cmp::Reverse(*gate));
    let report = GateReport {
        driver: name,
        cells: cells.len(),
        sessions: ran.len(),
        local_sessions: ran.iter().filter(|c| c.id.environment == "local").count(),
        not_applicable: results.iter().filter(|r| r.is_not_applicable()).count(),
        ignored: results.iter().filter(|r| r.is_ignored()).count(),
        differ_from_baseline: results.iter().filter(|r| r.is_failure()).count(),
        concurrency: concurrency.describe(),
        gate_wall_ms: millis(gate_wall),
        direct_jobs: args.direct_jobs,
        direct_wall_ms: millis(direct_wall),
        direct_nonzero: exits.iter().filter(|(code, _)| *code != Some(0)).count(),
        ratio: gate_wall.as_secs_f64() / direct_wall.as_secs_f64().max(1e-3),
        load,
        per_session_ms,
    };
    Ok(Measured { report, bench_root })
}

/// The driver to measure: the one `--driver` names, or the file's only one.
fn driver_name(args: &Args) -> Result<String> {
    let file = suites::DriversFile::read(&args.drivers)?;
    Ok(match (&args.driver, file.drivers.len()) {
        (Some(name), _) if file.drivers.contains_key(name) => name.clone(),
        (Some(name), _) => bail!("{} declares no driver `{name}`", file.name),
        (None, 1) => file.drivers.keys().next().cloned().unwrap_or_default(),
        (None, _) => bail!(
            "{} declares several drivers: name one with --driver ({})",
            file.name,
            file.drivers.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    })
}

/// The gate: the driver's fake cells in every environment that the filters select.
fn gate_cells(args: &Args, name: &str, ctx: &CellContext) -> Result<Vec<Cell>> {
    let matrix = matrix::load::load_matrix(Some(&args.drivers), &[], ctx.repo_root.as_deref())?;
    let fake_runner = format!("{name}-fake");
    let cells: Vec<Cell> = matrix
        .select(&args.filters)
        .into_iter()
        .filter(|c| c.runner.app_server == AppServerKind::Fake)
        .filter(|c| {
            c.id.runner == fake_runner || c.id.runner.starts_with(&format!("{fake_runner}-"))
        })
        .cloned()
        .collect();
    anyhow::ensure!(
        !cells.is_empty(),
        "driver `{name}` has no fake cell{}",
        if args.filters.is_empty() {
            ""
        } else {
            " that the filters select"
        }
    );
    Ok(cells)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn markdown(r: &GateReport) -> String {
    format!(
        "## The PR gate of `{driver}` against its own sessions\n\n\
         | | wall (s) | what |\n| --- | --- | --- |\n\
         | the gate | {gate:.2} | {cells} fake cells ({sessions} sessions: {local} local, {containers} in containers; {na} not applicable, {ignored} ignored; {differ} differ from the baseline), {concurrency} |\n\
         | direct | {direct:.2} | the same {sessions} sessions against the fake, no harness, {jobs} at a time ({nonzero} exited non-zero) |\n\n\
         **{ratio:.2}×** (target 1.5×); load average at the start: {load}\n\n\
         The slowest sessions (ms in the gate, directly): {slowest}\n",
        driver = r.driver,
        gate = r.gate_wall_ms as f64 / 1000.0,
        cells = r.cells,
        sessions = r.sessions,
        local = r.local_sessions,
        containers = r.sessions - r.local_sessions,
        na = r.not_applicable,
        ignored = r.ignored,
        differ = r.differ_from_baseline,
        concurrency = r.concurrency,
        direct = r.direct_wall_ms as f64 / 1000.0,
        jobs = r.direct_jobs,
        nonzero = r.direct_nonzero,
        ratio = r.ratio,
        load = r.load,
        slowest = r
            .per_session_ms
            .iter()
            .take(5)
            .map(|(cell, gate, direct)| format!("`{cell}` {gate}, {direct}"))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// In GitHub Actions (`$GITHUB_STEP_SUMMARY` set), append `markdown` to the job summary as
/// well; elsewhere nothing.
pub fn append_step_summary(markdown: &str) -> std::io::Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{markdown}"))
}

/// One direct session, ready to start.
struct Session {
    /// The driver's program and arguments, executed without a shell as a cell does.
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    stdout: PathBuf,
    stderr: PathBuf,
    bound: Duration,
}

async fn prepare_all(ctx: &CellContext, cells: &[&Cell]) -> Result<Vec<Session>> {
    let mut sessions = Vec::new();
    for cell in cells {
        sessions.push(
            prepare(ctx, cell)
                .await
                .with_context(|| format!("preparing the direct session of {}", cell.id))?,
        );
    }
    Ok(sessions)
}

/// The cell's session without the harness: its folders, task and scenario as the cell's stages
/// make them, and a `codex` that is the fake itself (a script that starts it with the cell's
/// arguments and environment).
async fn prepare(ctx: &CellContext, cell: &Cell) -> Result<Session> {
    let declared = cell
        .runner
        .declared
        .clone()
        .context("the runner has no declared driver")?;
    let folders = folders::prepare(ctx, cell)?;
    let root = folders.dirs.root.clone();
    // The fake starts nothing that must end with the cell (a mock model API is the real Codex's).
    let app = app_server::prepare(ctx, cell, &folders).await?.app_server;
    let bin = root.join("direct-bin");
    std::fs::create_dir_all(&bin)?;
    let codex = bin.join("codex");
    let quote = |s: &str| shlex::try_quote(s).map(|q| q.into_owned());
    let mut script = String::from("#!/bin/sh\nexec env");
    for (key, value) in &app.program.env {
        script.push_str(&format!(" {}", quote(&format!("{key}={value}"))?));
    }
    script.push_str(&format!(
        " {}",
        quote(&app.program.program.display().to_string())?
    ));
    // `fake-app-server app-server …`: the driver's own arguments (`app-server`) stand where the
    // fake's `app-server` is.
    let (subcommand, rest) = app
        .program
        .leading_args
        .split_first()
        .context("the fake has no subcommand")?;
    script.push_str(&format!(" {} \"$@\"", quote(subcommand)?));
    for arg in rest.iter().skip(1).chain(&app.program.extra_args) {
        script.push_str(&format!(" {}", quote(arg)?));
    }
    script.push('\n');
    std::fs::write(&codex, script)?;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755))?;
    let task_path = driver::write_task(&folders.dirs.evidence, &folders.task, &app.timeouts)?;
    let path = |p: &Path| p.display().to_string();
    let values = Placeholders {
        workspace: path(&folders.dirs.workspace),
        prompt: folders.task.prompt.clone(),
        mode: folders.task.mode.as_str().into(),
        codex: path(&codex),
        task: path(&task_path),
        repo: ctx.repo_root.as_deref().map(path).unwrap_or_default(),
        cache: path(&codex::provision::cache_root()?),
        idle_seconds: Placeholders::idle_seconds(app.timeouts.turn_idle),
        model: folders.task.model.clone().unwrap_or_default(),
    };
    let words = declared
        .command_words(&values)
        .map_err(|e| anyhow::anyhow!("the driver's command line: {e}"))?;
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    let mut set = |key: &str, value: String| match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key.to_string(), value)),
    };
    set("HOME", path(&folders.dirs.home));
    set("TMPDIR", path(&folders.dirs.tmp));
    match &declared.codex {
        CodexDiscovery::Path => set(
            "PATH",
            format!(
                "{}:{}",
                path(&bin),
                std::env::var("PATH").unwrap_or_default()
            ),
        ),
        CodexDiscovery::Env(name) => set(name, path(&codex)),
        CodexDiscovery::Arg => {}
    }
    for (key, value) in declared
        .environment(&values)
        .map_err(|e| anyhow::anyhow!("the driver's environment: {e}"))?
    {
        set(&key, value);
    }
    for (key, value) in words.assignments {
        set(&key, value);
    }
    let bound = driver::bounds(&app.timeouts, &folders.task, Some(&declared)).overall;
    let cwd = declared.base_dir.clone().unwrap_or(folders.dirs.workspace);
    Ok(Session {
        argv: driver::program_from(&cwd, words.argv),
        env,
        cwd,
        stdout: root.join("direct-stdout.log"),
        stderr: root.join("direct-stderr.log"),
        bound,
    })
}

/// Run `sessions`, `jobs` at a time; each one's exit code (`None`: killed at its bound, or by
/// a signal) and wall time in ms, in the sessions' order.
async fn run_direct(sessions: Vec<Session>, jobs: usize) -> Result<Vec<(Option<i32>, u64)>> {
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut tasks = tokio::task::JoinSet::new();
    let count = sessions.len();
    for (index, session) in sessions.into_iter().enumerate() {
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await?;
            let started = Instant::now();
            let (program, args) = session
                .argv
                .split_first()
                .context("the driver's command line has no program")?;
            let mut child = tokio::process::Command::new(program)
                .args(args)
                .env_clear()
                .envs(session.env.iter().map(|(k, v)| (k, v)))
                .current_dir(&session.cwd)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&session.stdout)?)
                .stderr(std::fs::File::create(&session.stderr)?)
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting `{}`", session.argv.join(" ")))?;
            let group = child.id().context("a started child has a pid")?;
            let status = tokio::time::timeout(session.bound, child.wait()).await;
            // The whole group: a driver's app-server outlives a killed `sh` otherwise.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(group as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let code = match status {
                Ok(status) => status?.code(),
                Err(_) => None,
            };
            anyhow::Ok((index, code, millis(started.elapsed())))
        });
    }
    let mut exits = vec![(None, 0); count];
    while let Some(joined) = tasks.join_next().await {
        let (index, code, ms) = joined??;
        exits[index] = (code, ms);
    }
    Ok(exits)
}
