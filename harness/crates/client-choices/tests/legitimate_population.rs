//! The legitimate population (docs/population.md): seeded (setting, protocol cell) pairs, each
//! setting a legitimate client (`population-driver`), each cell one of the `protocol` profile's
//! in `local`. No pair may be red: a red pair is a grader defect (or an ambiguity to report),
//! and the failure names the setting and the cell, and the seed that draws them again.
//!
//! - `legitimate_population_is_green_against_the_fake`: `HARNESS_POPULATION_PAIRS` pairs
//!   (default 200) against the fake;
//! - `legitimate_population_is_green_needs_real_codex`: `HARNESS_POPULATION_REAL_PAIRS` (default
//!   12) against the pinned real Codex.
//!
//! `HARNESS_POPULATION_SEED` fixes the seed (else one is drawn and printed);
//! `HARNESS_POPULATION_ALL=1` runs every setting of the cross product instead of a sample, each
//! with a cell drawn from the seed, `HARNESS_POPULATION_SHARD=K/N` one shard of it (the nightly
//! job); `HARNESS_POPULATION_JOBS` pairs run at once (default 4).
//!
//! This binary is also the fake app-server and the wire tap of its cells (their hidden
//! subcommands), as the suites' `cells` binary is.

use client_choices::{Setting, Space};
use libtest_mimic::{Arguments, Failed, Trial};
use matrix::context::CellContext;
use report::outcome::CellOutcome;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use suites::spec::Profile;
use suites::Cell;

const VERSION: &str = "0.169.0";
const DRIVER: &str = "population";

fn main() -> ExitCode {
    if let Some(code) = harness::dispatch::start_cells_binary() {
        return code;
    }
    let arguments = Arguments::from_args();
    let setup = match Setup::load() {
        Ok(setup) => Arc::new(setup),
        Err(e) => {
            eprintln!("error: the population's matrix does not load: {e}");
            return ExitCode::from(101);
        }
    };
    let trial = |name: &str, app_server: &'static str, pairs: usize| {
        let setup = setup.clone();
        // A real Codex that is not provisioned here: ignored with the reason (a failure under
        // CI=true), as every `…_needs_real_codex` test.
        let missing = setup.missing(app_server);
        if let Some(reason) = &missing {
            eprintln!("{name}: ignored: {reason}");
        }
        Trial::test(name, move || population(&setup, app_server, pairs))
            .with_ignored_flag(missing.is_some())
    };
    let trials = vec![
        trial(
            "legitimate_population_is_green_against_the_fake",
            "fake",
            env_number("HARNESS_POPULATION_PAIRS", 200),
        ),
        trial(
            "legitimate_population_is_green_needs_real_codex",
            "codex",
            env_number("HARNESS_POPULATION_REAL_PAIRS", 12),
        ),
    ];
    libtest_mimic::run(&arguments, trials).exit_code()
}

/// The population driver's protocol cells in `local`, and the context they run in.
struct Setup {
    /// Holds the drivers file.
    _dir: tempfile::TempDir,
    cells: Vec<Cell>,
    ctx: CellContext,
}

impl Setup {
    fn load() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let repo_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        let matrix =
            matrix::load::load_matrix(Some(&drivers_file(dir.path())), &[], Some(&repo_root))
                .map_err(|e| format!("{e:#}"))?;
        let cells = matrix
            .cells
            .into_iter()
            .filter(|c| c.profile == Profile::Protocol && c.id.environment == "local")
            .filter(|c| c.not_applicable.is_none())
            .collect();
        let mut ctx = CellContext::from_env().map_err(|e| format!("{e:#}"))?;
        ctx.repo_root = Some(repo_root);
        Ok(Self {
            _dir: dir,
            cells,
            ctx,
        })
    }

    fn cells(&self, app_server: &str) -> Vec<Cell> {
        let runner = format!("{DRIVER}-{app_server}");
        self.cells
            .iter()
            .filter(|c| c.id.runner == runner)
            .cloned()
            .collect()
    }

    /// Why the cells against `app_server` cannot run here (never under CI=true).
    fn missing(&self, app_server: &str) -> Option<String> {
        if self.ctx.ci {
            return None;
        }
        matrix::prereq::missing(self.cells(app_server).first()?, &self.ctx)
    }
}

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number")),
        Err(_) => default,
    }
}

fn seed() -> u64 {
    match std::env::var("HARNESS_POPULATION_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("HARNESS_POPULATION_SEED={v:?}: expected a number")),
        Err(_) => fastrand::u64(..),
    }
}

/// The population driver's idle wait, declared: the same on both app-servers. Not the cell's
/// `{idle_seconds}` (2 s against the fake): the tap relays the stderr-flood case's 4 MiB to a
/// driver that inherits its app-server's stderr at a fraction of a MB/s on a loaded machine,
/// seconds without a line on the wire.
const IDLE_SECONDS: u64 = 15;

/// The drivers file declaring the population driver; `SETTING` in its command is replaced per
/// pair.
fn drivers_file(dir: &Path) -> PathBuf {
    let driver = env!("CARGO_BIN_EXE_population-driver");
    let text = format!(
        "[drivers.{DRIVER}]\n\
         command = \"{driver} --setting SETTING --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout {IDLE_SECONDS}\"\n\
         idle_timeout_seconds = {IDLE_SECONDS}\n\
         codex = \"env:CODEX_PATH\"\n\
         modes = [\"planning\", \"standard\", \"ask\"]\n\
         outcome = \"exit-status\"\n"
    );
    let path = dir.join("population.toml");
    std::fs::write(&path, text).expect("writing the drivers file");
    path
}

/// The modes a setting can drive: plan mode needs `experimentalApi` (a client without it
/// declares no planning, so planning cases are not applicable to it).
fn drives_mode(setting: &Setting, cell: &Cell) -> bool {
    setting.experimental_api || cell.case.mode != graders::events::Mode::Planning
}

/// The cells that take seconds (a burst of 100 000 deltas, megabyte lines, a stderr flood, a
/// request never answered), run first.
fn slow(cell: &Cell) -> bool {
    cell.id.suite == "protocol-size" || cell.id.case == "no-answer"
}

/// One pair's cell: the population driver told `setting`.
fn pair_cell(cell: &Cell, setting: &Setting) -> Cell {
    let mut cell = cell.clone();
    let declared = cell
        .runner
        .declared
        .as_mut()
        .expect("a declared driver's cell");
    declared.command = declared.command.replace("SETTING", &setting.to_string());
    cell
}

fn population(setup: &Setup, app_server: &str, count: usize) -> Result<(), Failed> {
    let seed = seed();
    let cells = setup.cells(app_server);
    if cells.is_empty() {
        return Err(format!("no protocol cell of `{DRIVER}-{app_server}` in local").into());
    }
    let space = Space::of(VERSION).map_err(|e| e.to_string())?;
    let settings = settings(&space, seed, count)?;
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let mut pairs: Vec<(Setting, Cell)> = settings
        .into_iter()
        .map(|setting| {
            let usable: Vec<&Cell> = cells.iter().filter(|c| drives_mode(&setting, c)).collect();
            let cell = pair_cell(usable[rng.usize(..usable.len())], &setting);
            (setting, cell)
        })
        .collect();
    // The long cells first, so that they do not stretch the end of the run.
    pairs.sort_by_key(|(_, cell)| !slow(cell));
    eprintln!(
        "legitimate population: seed {seed} (HARNESS_POPULATION_SEED), {} pairs of {} settings × {} cells, against the {app_server}",
        pairs.len(),
        space.len(),
        cells.len()
    );
    // Under the target folder, so a red pair's evidence outlives the run; a green pair's is
    // removed as soon as it is graded.
    let mut ctx = setup.ctx.clone();
    ctx.out_root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("population")
        .join(format!("{app_server}-{seed}"));
    let started = Instant::now();
    let red = run_pairs(Arc::new(ctx), pairs)?;
    eprintln!(
        "legitimate population: ran in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if red.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} red pairs (seed {seed}; HARNESS_POPULATION_SEED={seed} draws them again):\n{}",
        red.len(),
        red.join("\n")
    )
    .into())
}

/// The settings of this run: a sample of `count`, or with `HARNESS_POPULATION_ALL=1` the whole
/// cross product (its shard `HARNESS_POPULATION_SHARD=K/N`).
fn settings(space: &Space, seed: u64, count: usize) -> Result<Vec<Setting>, Failed> {
    if std::env::var("HARNESS_POPULATION_ALL").as_deref() != Ok("1") {
        return Ok(space.sample(seed, count));
    }
    let (k, n) = match std::env::var("HARNESS_POPULATION_SHARD") {
        Ok(v) => {
            let parsed = v
                .split_once('/')
                .and_then(|(k, n)| Some((k.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
            match parsed {
                Some((k, n)) if k >= 1 && k <= n => (k, n),
                _ => return Err(format!("HARNESS_POPULATION_SHARD={v:?}: expected K/N").into()),
            }
        }
        Err(_) => (1, 1),
    };
    Ok(space
        .all()
        .enumerate()
        .filter(|(i, _)| *i as u64 % n == k - 1)
        .map(|(_, s)| s)
        .collect())
}

/// Runs the pairs, `HARNESS_POPULATION_JOBS` at once, each in an evidence folder of its own;
/// returns a line per red pair.
fn run_pairs(ctx: Arc<CellContext>, pairs: Vec<(Setting, Cell)>) -> Result<Vec<String>, Failed> {
    let jobs = env_number("HARNESS_POPULATION_JOBS", 4).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let limit = Arc::new(tokio::sync::Semaphore::new(jobs));
        let mut running = tokio::task::JoinSet::new();
        for (index, (setting, cell)) in pairs.into_iter().enumerate() {
            let permit = limit.clone().acquire_owned().await.expect("never closed");
            let mut ctx = (*ctx).clone();
            ctx.out_root = ctx.out_root.join(format!("pair-{index}"));
            running.spawn(async move {
                let result = matrix::cell::run_cell(&ctx, &cell).await;
                drop(permit);
                let verdict = match &result.outcome {
                    CellOutcome::Graded { verdict, .. } => verdict.verdict.to_string(),
                    CellOutcome::NotApplicable { .. } => "not-applicable".into(),
                    other => format!("{other:?}").chars().take(40).collect(),
                };
                let red = match &result.outcome {
                    CellOutcome::NotApplicable { .. } => None,
                    CellOutcome::Ignored { reason } => Some(format!("ignored: {reason}")),
                    _ if result.is_failure() => Some(result.describe()),
                    _ => None,
                };
                if red.is_none() {
                    // A green pair's evidence is of no further use; removed now, the cost of
                    // deleting 200 cells' folders is spread over the run.
                    let _ = tokio::fs::remove_dir_all(&ctx.out_root).await;
                }
                let slow = (result.duration, cell.id.case.clone());
                let red = red.map(|why| {
                    format!(
                        "- pair {index}: cell {} with --setting {setting}\n  {why}\n  evidence: {}",
                        cell.name(),
                        result.evidence_dir.display()
                    )
                });
                (verdict, red, slow)
            });
        }
        let mut red = Vec::new();
        let mut verdicts = std::collections::BTreeMap::<String, usize>::new();
        let mut slowest = Vec::new();
        while let Some(done) = running.join_next().await {
            let (verdict, line, slow) = done.map_err(|e| e.to_string())?;
            *verdicts.entry(verdict).or_default() += 1;
            red.extend(line);
            slowest.push(slow);
        }
        slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
        slowest.truncate(5);
        eprintln!("legitimate population: verdicts {verdicts:?}; slowest cells {slowest:?}");
        red.sort();
        Ok(red)
    })
}
