//! Dishonest drivers where `local` gives the driver no mount namespace of its own ("`local`,
//! neither" in docs/prerequisites.md; forced here with `CellContext::local_isolation = false`,
//! which `HARNESS_LOCAL_ISOLATION=off` sets for `harness run`). The driver can then write its
//! whole cell folder, so its forgeries land; what must hold is that the harness refuses the
//! evidence — a harness error naming the forged file — and never grades it.
//!
//! - The forging driver of `evidence_attack.rs` (never starts its app-server, copies a passing
//!   cell's transcript, model log, events, verdict and logs over its own): the transcript is
//!   not what the recorder wrote.
//! - A driver that runs the planning turn itself (its transcript is its own) and then copies a
//!   passing cell's model log over its own: the model log is not this cell's.
//!
//! Against the fake always, against the pinned real Codex where it is installed.

use crate::common;

use common::prereq;
use libtest_mimic::{Failed, Trial};
use matrix::cell::run_cell;
use matrix::context::CellContext;
use report::layout::{self, CellEvidence};
use report::outcome::{CellOutcome, CellResult};
use std::path::{Path, PathBuf};

/// Copies each file named after its first argument (the workspace) over the file of the same
/// name in its own cell folder, saying what landed in its own part of the folder (its stdout is
/// one of the files it overwrites); exits 0 as a driver that finished would.
const FORGING_DRIVER: &str = r#"
workspace=$1; shift
cell=$(dirname "$(dirname "$workspace")")
for source in "$@"; do
  name=$(basename "$source")
  if cp "$source" "$cell/$name" 2>/dev/null; then said="forged $name"; else said="refused $name"; fi
  echo "$said" >> "$cell/driver/forgeries.log"
done
exit 0
"#;

/// Runs the cell's own driver (the arguments after the first three) and copies the model log
/// named first over its own cell's, `before` its driver runs (its app-server then writes after
/// the copy) or `after` (second argument; the workspace is third); exits as the driver did.
const MODEL_LOG_FORGING_DRIVER: &str = r#"
source=$1; when=$2; workspace=$3; shift 3
cell=$(dirname "$(dirname "$workspace")")
forge() {
if cp "$source" "$cell/$(basename "$source")" 2>/dev/null; then said="forged"; else said="refused"; fi
echo "$said $(basename "$source")" >> "$cell/driver/forgeries.log"
}
if [ "$when" = before ]; then forge; fi
"$@"
status=$?
if [ "$when" = after ]; then forge; fi
exit $status
"#;

/// Replaces the scenario its app-server will play (`scenario.toml` in its cell folder) with a
/// copy of the same bytes, then runs the cell's own driver (the arguments after the first).
const SCENARIO_REPLACING_DRIVER: &str = r#"
workspace=$1; shift
cell=$(dirname "$(dirname "$workspace")")
if cp "$cell/scenario.toml" "$cell/scenario.copy" 2>/dev/null && mv "$cell/scenario.copy" "$cell/scenario.toml" 2>/dev/null; then said=forged; else said=refused; fi
echo "$said scenario.toml" >> "$cell/driver/forgeries.log"
exec "$@"
"#;

/// A cell context whose `local` drivers run without a mount namespace of their own.
fn without_isolation(out: &Path) -> CellContext {
    let mut context = CellContext::from_env().expect("the cell context");
    context.out_root = out.to_path_buf();
    context.harness_binary = env!("CARGO_BIN_EXE_harness").into();
    context.repo_root = Some(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the repository root")
            .to_path_buf(),
    );
    context.ci = false;
    context.local_isolation = false;
    context
}

fn load(cell_name: &str) -> Result<suites::Cell, Failed> {
    Ok(suites::load()?
        .cell(cell_name)
        .ok_or_else(|| format!("no cell {cell_name}"))?
        .clone())
}

fn run(cell: &suites::Cell, out: &Path) -> Result<CellResult, Failed> {
    Ok(tokio::runtime::Runtime::new()?.block_on(run_cell(&without_isolation(out), cell)))
}

/// The cell run honestly without isolation: it passes, and its evidence is the forgers' source.
fn honest_run(cell: &suites::Cell, out: &Path) -> Result<CellEvidence, Failed> {
    let honest = run(cell, out)?;
    match &honest.outcome {
        CellOutcome::Graded { verdict, .. } if verdict.is_pass() => {
            Ok(CellEvidence::new(&honest.evidence_dir))
        }
        other => Err(format!(
            "the honest run of {} without isolation should pass: {other:?}",
            cell.name()
        )
        .into()),
    }
}

/// The command of `cell`'s declared driver.
fn own_command(cell: &suites::Cell) -> Result<String, Failed> {
    Ok(cell
        .runner
        .declared
        .as_ref()
        .ok_or("the cell's runner is a declared driver")?
        .command
        .clone())
}

/// `cell` with its declared driver's command replaced by `command`.
fn with_command(cell: &suites::Cell, command: String) -> Result<suites::Cell, Failed> {
    let mut dishonest = cell.clone();
    dishonest
        .runner
        .declared
        .as_mut()
        .ok_or("the cell's runner is a declared driver")?
        .command = command;
    Ok(dishonest)
}

/// The dishonest run's cell must be a harness error naming `file` (and the forgery must have
/// landed: else this path was not the one without isolation).
fn refused_naming(result: &CellResult, file: &str, forger: &str) -> Result<(), Failed> {
    let said = std::fs::read_to_string(
        CellEvidence::new(&result.evidence_dir)
            .driver()
            .join("forgeries.log"),
    )
    .unwrap_or_default();
    eprintln!(
        "{forger}: the driver said {said:?}; the cell: {:?}",
        result.outcome
    );
    if !said.contains(&format!("forged {file}")) {
        return Err(format!(
            "the forgery of {file} did not land, so this was not the path without isolation (the driver said: {said:?})"
        )
        .into());
    }
    match &result.outcome {
        CellOutcome::Error { message }
            if message.contains("tampered") && message.contains(file) =>
        {
            Ok(())
        }
        other => Err(format!(
            "{forger}: the cell should be a harness error naming {file}: {other:?}"
        )
        .into()),
    }
}

fn copying_a_passing_cells_evidence_is_a_harness_error(cell_name: &str) -> Result<(), Failed> {
    let cell = load(cell_name)?;
    let honest_out = tempfile::tempdir()?;
    let passing = honest_run(&cell, honest_out.path())?;
    let forgeries: Vec<PathBuf> = vec![
        passing.transcript(),
        passing.model_log(),
        passing.events(),
        passing.verdict(),
        passing.driver_stdout(),
        passing.stderr(),
    ];
    let scratch = tempfile::tempdir()?;
    let script = scratch.path().join("forging-driver.sh");
    std::fs::write(&script, FORGING_DRIVER)?;
    let command = std::iter::once(format!("sh {} {{workspace}}", script.display()))
        .chain(forgeries.iter().map(|f| f.display().to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let out = tempfile::tempdir()?;
    let result = run(&with_command(&cell, command)?, out.path())?;
    refused_naming(&result, layout::TRANSCRIPT, "the forging driver")
}

fn copying_a_passing_cells_model_log_is_never_graded(
    cell_name: &str,
    when: &str,
) -> Result<(), Failed> {
    let cell = load(cell_name)?;
    let honest_out = tempfile::tempdir()?;
    let passing = honest_run(&cell, honest_out.path())?;
    let scratch = tempfile::tempdir()?;
    let script = scratch.path().join("model-log-forging-driver.sh");
    std::fs::write(&script, MODEL_LOG_FORGING_DRIVER)?;
    let own = own_command(&cell)?;
    let command = format!(
        "sh {} {} {when} {{workspace}} {own}",
        script.display(),
        passing.model_log().display()
    );
    let out = tempfile::tempdir()?;
    let result = run(&with_command(&cell, command)?, out.path())?;
    let forger = format!("the model-log forging driver ({when})");
    // A copy made before the run can be overwritten whole by the app-server's own writes (the
    // mock model API writes from the start of the file it created): then the evidence graded
    // is the cell's own again, which is what must hold. Else the copy must be refused.
    let forged = std::fs::read(passing.model_log())?;
    let landed = std::fs::read(CellEvidence::new(&result.evidence_dir).model_log())?;
    if when == "before" && !forged.is_empty() && !contains(&landed, &forged) {
        if let CellOutcome::Graded { .. } = &result.outcome {
            if let Some(id) = foreign_probe_id(&forged, &landed) {
                return Err(format!(
                    "{forger}: graded with the passing cell's probe id {id} in the model log: {:?}",
                    result.outcome
                )
                .into());
            }
            eprintln!(
                "{forger}: the app-server's own writes replaced the copy: {:?}",
                result.outcome
            );
            return Ok(());
        }
    }
    refused_naming(&result, layout::MODEL_LOG, &forger)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A probe file name of the `forged` model log that is still in the `landed` one.
fn foreign_probe_id(forged: &[u8], landed: &[u8]) -> Option<String> {
    let forged = String::from_utf8_lossy(forged);
    let landed = String::from_utf8_lossy(landed);
    forged
        .match_indices("plan-write-probe-")
        .filter_map(|(at, _)| forged.get(at..at + "plan-write-probe-".len() + 8))
        .find(|name| landed.contains(name))
        .map(str::to_string)
}

fn replacing_the_scenario_is_a_harness_error(cell_name: &str) -> Result<(), Failed> {
    let cell = load(cell_name)?;
    let scratch = tempfile::tempdir()?;
    let script = scratch.path().join("scenario-replacing-driver.sh");
    std::fs::write(&script, SCENARIO_REPLACING_DRIVER)?;
    let own = own_command(&cell)?;
    let command = format!("sh {} {{workspace}} {own}", script.display());
    let out = tempfile::tempdir()?;
    let result = run(&with_command(&cell, command)?, out.path())?;
    refused_naming(&result, layout::SCENARIO, "the scenario-replacing driver")
}

/// A fake cell whose scenario is a file in its cell folder.
const FAKE_SCENARIO_FILE_CELL: &str =
    "startup-rejection.runner-minimal-fake.local.transient-startup-failure";
const FAKE_CELL: &str = "codex-planning-read-only.runner-minimal-fake.local.plan-write-refused";
const CODEX_CELL: &str = "codex-planning-read-only.runner-minimal-codex.local.plan-write-refused";

pub fn trials() -> Vec<Trial> {
    let trials = vec![
        prereq::trial(
            "without_isolation_a_driver_replacing_its_app_servers_scenario_is_a_harness_error_fake",
            None,
            || replacing_the_scenario_is_a_harness_error(FAKE_SCENARIO_FILE_CELL),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_evidence_is_a_harness_error_fake",
            None,
            || copying_a_passing_cells_evidence_is_a_harness_error(FAKE_CELL),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_model_log_before_its_run_never_has_the_copy_graded_fake",
            None,
            || copying_a_passing_cells_model_log_is_never_graded(FAKE_CELL, "before"),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_model_log_after_its_run_is_a_harness_error_fake",
            None,
            || copying_a_passing_cells_model_log_is_never_graded(FAKE_CELL, "after"),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_evidence_is_a_harness_error_needs_real_codex",
            prereq::codex_missing(),
            || copying_a_passing_cells_evidence_is_a_harness_error(CODEX_CELL),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_model_log_before_its_run_never_has_the_copy_graded_needs_real_codex",
            prereq::codex_missing(),
            || copying_a_passing_cells_model_log_is_never_graded(CODEX_CELL, "before"),
        ),
        prereq::trial(
            "without_isolation_a_driver_copying_a_passing_cells_model_log_after_its_run_is_a_harness_error_needs_real_codex",
            prereq::codex_missing(),
            || copying_a_passing_cells_model_log_is_never_graded(CODEX_CELL, "after"),
        ),
    ];
    trials
}
