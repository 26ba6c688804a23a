//! Stage 5, the run's events, all in `events.jsonl`: from the wire (the transcript the tap
//! recorded, through `graders::wire`), compared with the driver's own events when it writes
//! them — every disagreement is a finding (a `diagnostic` in the log and a line in
//! `findings.json`), and the wire wins — then the harness's own evidence: what it had to kill
//! when the cell ended, what the model was told (`model.*`, from the model log), which
//! bubblewrap Codex used, the canary files of the app-server's home, the workspace's probe
//! files, and `run.ended`.

use super::driver::{Declaration, DriverRun};
use super::folders::Folders;
use super::sandbox::SandboxEvidence;
use crate::own_evidence::{self, TranscriptFacts};
use anyhow::{Context, Result};
use driver::event_log::EventLog;
use fake_app_server::model_log::ModelLogEntry;
use graders::events::{
    Body, Diagnostic, Level, ModelToolCall, ModelToolOutput, ProbeFile, RunEnded, Source,
    WorkspaceEvidence,
};
use graders::evidence_file::{self, MAX_STREAMED_BYTES};
use graders::tool_call::ToolArguments;
use graders::wire::{self, DriverEnd};
use sha2::{Digest, Sha256};
use std::io::BufRead;
use std::path::Path;
use suites::Cell;

/// How the harness words its bubblewrap evidence (`harness repro` reads it back).
pub const BUBBLEWRAP_PREFIX: &str = "bubblewrap Codex uses here: ";
/// Longest model-log line accepted (tool outputs are excerpts; a longer line is a broken log).
const MAX_MODEL_LOG_LINE: usize = 1 << 20;

/// The run's events so far: the wire's (and the driver's own), and the terminal the wire shows.
pub(crate) struct WireEvents {
    log: EventLog,
    ended: RunEnded,
    /// What the sealed transcript says of the cell, to check its model log against.
    facts: TranscriptFacts,
}

/// The key the harness marks the event streams it writes with (`driver::provenance`), loaded
/// (made the first time) once per process.
pub fn evidence_key() -> Result<std::sync::Arc<driver::provenance::Key>> {
    static KEY: std::sync::OnceLock<Result<std::sync::Arc<driver::provenance::Key>, String>> =
        std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        codex::provision::cache_root()
            .and_then(|cache| driver::provenance::Key::load_or_create(&cache))
            .map(std::sync::Arc::new)
            .map_err(|e| format!("the harness's evidence key: {e:#}"))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// Stage 5, first half: the run's events from the wire, into `events.jsonl`. Read before the
/// cell's guard finishes, as the driver left them.
pub(crate) fn from_the_wire(
    cell: &Cell,
    folders: &Folders,
    driver: &Declaration,
    run: &DriverRun,
) -> Result<WireEvents> {
    let evidence = &folders.dirs.evidence;
    let mut log = EventLog::to_file_marked(&run_id(cell), &evidence.events(), evidence_key()?)?;
    // The release whose schema the driver's answers are checked against: the real Codex's
    // version, or the release the fake plays.
    let release = cell
        .runner
        .codex_version
        .clone()
        .or_else(|| cell.runner.plays.clone())
        .unwrap_or_else(|| fake_app_server::persona::DEFAULT_VERSION.to_string());
    let ctx = wire::Context {
        cell: cell.id.clone(),
        driver: driver.name.clone(),
        mode: cell.case.mode,
        target: cell.target,
        network_enabled: cell.case.network,
        policy: cell.runner.policy,
        protocol: graders::events::ProtocolSetup {
            declarations: driver.declared.declarations(),
            canaries: driver.canaries.as_ref().map(|c| c.record()),
            // What the release sends only to clients that declared the experimental API, as
            // measured from its binary (none known for a release without a persona).
            experimental_only_notifications: fake_app_server::persona::find(&release)
                .map(|p| p.experimental_notifications().map(str::to_string).collect())
                .unwrap_or_default(),
            release: Some(release),
            task: Some(task_choices(&folders.dirs.workspace, &folders.task)),
        },
    };
    let transcript = evidence.transcript();
    // Only what the harness recorded is graded: a transcript rewritten behind its back is a
    // harness error naming it, never a verdict.
    run.transcript.check(&transcript).map_err(tampered)?;
    let facts = TranscriptFacts::read(&transcript).map_err(tampered)?;
    let ended = from_wire(
        &mut log,
        &ctx,
        &transcript,
        &run.end,
        run.events.as_deref(),
        &evidence.findings(),
    )?;
    // What the harness told the driver beyond the wire (an interrupt, a steering line).
    for (warn, message) in &run.told {
        log.emit(
            Source::Harness,
            Body::Diagnostic(Diagnostic {
                level: if *warn { Level::Warn } else { Level::Info },
                message: message.clone(),
            }),
        )?;
    }
    Ok(WireEvents { log, ended, facts })
}

/// What the task chose, as the driver was told it: the workspace as `{workspace}` and
/// `HARNESS_WORKSPACE` name it, and as the kernel resolves it (a driver may canonicalise it).
fn task_choices(workspace: &Path, task: &driver::task::Task) -> graders::events::TaskChoices {
    let told = workspace.display().to_string();
    let mut spellings = vec![told.clone()];
    if let Ok(resolved) = std::fs::canonicalize(workspace) {
        let resolved = resolved.display().to_string();
        if resolved != told {
            spellings.push(resolved);
        }
    }
    graders::events::TaskChoices {
        workspace: spellings,
        approvals: task.approvals.map(|a| a.name().to_string()),
        model: task.model.clone(),
    }
}

/// Evidence that is not the cell's own: a harness error naming the file, never a verdict.
fn tampered(why: String) -> anyhow::Error {
    anyhow::anyhow!("the cell's evidence was tampered with: {why}")
}

/// Stage 5, second half, after the cell's guard finished: the harness's own evidence — what it
/// had to kill (`left_behind`), what the model was told, the bubblewrap in use, the canary
/// files of the app-server's home, the workspace's probe files — and `run.ended`. The whole
/// log, written.
pub(crate) fn with_the_harness_evidence(
    wire: WireEvents,
    sandbox: SandboxEvidence,
    finished: &crate::guard::Finished,
    model_log: &Path,
    workspace: &Path,
    home: Option<&super::home_canaries::PlantedHome>,
) -> Result<EventLog> {
    let left_behind = &finished.left_behind;
    let WireEvents {
        mut log,
        ended,
        facts,
    } = wire;
    if !left_behind.is_empty() {
        log.emit(
            Source::Harness,
            Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: format!(
                    "killed {} process(es) the app-server left behind: {}",
                    left_behind.len(),
                    sandbox::cgroup::describe(left_behind)
                ),
            }),
        )?;
    }
    // What the app-server read is what the harness wrote for it.
    sandbox.inputs.check_unchanged().map_err(tampered)?;
    // Its writer (the fake, the mock model API) has ended: is what is there its? The harness's
    // own writer sealed what it wrote; the fake's is checked for being this cell's.
    if let Some(seal) = &finished.model_log {
        seal.check(model_log).map_err(tampered)?;
    }
    own_evidence::check_model_log(model_log, &facts).map_err(tampered)?;
    append_model_events(&mut log, model_log)?;
    log.emit(
        Source::Harness,
        Body::Diagnostic(Diagnostic {
            level: Level::Info,
            message: format!("{BUBBLEWRAP_PREFIX}{}", sandbox.bubblewrap),
        }),
    )?;
    if let Some(home) = home {
        log.emit(Source::Harness, Body::HomeEvidence(home.evidence()))?;
    }
    let after = workspace_evidence(workspace)?;
    kernel_evidence(&mut log, sandbox.watcher, &after)?;
    log.emit(Source::Harness, Body::WorkspaceEvidence(after))?;
    log.end(ended)?;
    log.flush()?;
    Ok(log)
}

fn run_id(cell: &Cell) -> String {
    format!(
        "{}-{}",
        cell.name(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    )
}

/// Translate the transcript into `log` (which must be empty) and return the run's terminal.
fn from_wire(
    log: &mut EventLog,
    ctx: &wire::Context,
    transcript: &Path,
    end: &DriverEnd,
    driver_events: Option<&Path>,
    findings_file: &Path,
) -> Result<RunEnded> {
    // No transcript at all: the driver never ran `codex`.
    let file: Box<dyn std::io::Read> = match evidence_file::open(transcript, MAX_STREAMED_BYTES)? {
        Some(file) => Box::new(file),
        None => Box::new(std::io::empty()),
    };
    let mut translation = wire::translate(std::io::BufReader::new(file), ctx, end)
        .with_context(|| format!("translating {}", transcript.display()))?;
    if let Some(path) = driver_events {
        translation = match driver::external::read_events(path) {
            Ok((bodies, terminal)) => {
                wire::compare::with_driver_events(translation, &bodies, terminal.as_ref())
            }
            Err(why) => {
                translation.findings.push(format!(
                    "the driver's own events are invalid, so only the wire is used: {why}"
                ));
                translation
            }
        };
    }
    let times = std::mem::take(&mut translation.times);
    for (i, body) in translation.events.into_iter().enumerate() {
        log.emit_at(
            Source::Driver,
            body,
            times.get(i).copied().filter(|&t| t > 0),
        )?;
    }
    for finding in &translation.findings {
        log.emit(
            Source::Harness,
            Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: format!("finding (the wire wins): {finding}"),
            }),
        )?;
    }
    if !translation.findings.is_empty() {
        std::fs::write(
            findings_file,
            serde_json::to_string_pretty(&translation.findings)? + "\n",
        )
        .with_context(|| format!("writing {}", findings_file.display()))?;
    }
    Ok(translation.terminal)
}

/// What the kernel saw happen to the workspace (`tap::workspace`): a probe file that existed at
/// some moment and is gone after the run is harness workspace evidence showing it, emitted
/// before the listing after the run (which stays the last), so the graders count it as a write
/// that succeeded. No watch, or one that missed events: said, and the graders keep to the
/// listing after the run, as without a watcher. A workspace folder moved away or removed during
/// the run: a harness error naming it.
fn kernel_evidence(
    log: &mut EventLog,
    watched: std::result::Result<tap::workspace::WorkspaceWatcher, String>,
    after: &WorkspaceEvidence,
) -> Result<()> {
    let warn = |log: &mut EventLog, message: String| -> Result<()> {
        log.emit(
            Source::Harness,
            Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message,
            }),
        )?;
        Ok(())
    };
    let changes = match watched.and_then(|w| w.finish().map_err(|e| format!("{e:#}"))) {
        Ok(changes) => changes,
        Err(why) => {
            warn(
                log,
                format!("the workspace was not watched ({why}): only what it holds after the run is evidence"),
            )?;
            return Ok(());
        }
    };
    // Not a verdict: the listing after the run would be of a folder that was not watched
    // (the driver can put one in the workspace's place, write the probe there and move the
    // watched one back), so nothing shows what was written at the workspace's path.
    if let Some(why) = &changes.workspace_lost {
        anyhow::bail!("the workspace watch cannot vouch for the workspace: {why}");
    }
    if let Some(why) = &changes.incomplete {
        warn(log, format!("the workspace watch missed changes: {why}"))?;
    }
    let gone: Vec<ProbeFile> = changes
        .appeared
        .iter()
        .filter(|path| path.starts_with(PROBE_PREFIX) && !path.contains('/'))
        .filter(|path| !after.probes.iter().any(|p| &&p.path == path))
        .map(|path| ProbeFile {
            path: path.clone(),
            exists: true,
            size: None,
            sha256: None,
        })
        .collect();
    if gone.is_empty() {
        return Ok(());
    }
    warn(
        log,
        format!(
            "the kernel saw probe file(s) created in the workspace and removed before the run ended: {}",
            gone.iter().map(|p| p.path.as_str()).collect::<Vec<_>>().join(", ")
        ),
    )?;
    log.emit(
        Source::Harness,
        Body::WorkspaceEvidence(WorkspaceEvidence {
            pattern: after.pattern.clone(),
            probes: gone,
        }),
    )?;
    Ok(())
}

/// The files a write probe creates in the workspace.
pub(crate) const PROBE_PREFIX: &str = "plan-write-probe-";
/// The largest probe file hashed (a probe writes a line).
const MAX_PROBE_BYTES: u64 = 16 << 20;

/// Append one `model.*` event per model-log line. A missing log means the model was never
/// reached (e.g. the session never opened): nothing to append.
pub fn append_model_events(log: &mut EventLog, model_log: &Path) -> Result<usize> {
    let Some(file) = evidence_file::open(model_log, MAX_STREAMED_BYTES)? else {
        return Ok(0);
    };
    let mut count = 0;
    for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", model_log.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        anyhow::ensure!(
            line.len() <= MAX_MODEL_LOG_LINE,
            "{} line {}: longer than {MAX_MODEL_LOG_LINE} bytes",
            model_log.display(),
            index + 1
        );
        let entry: ModelLogEntry = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", model_log.display(), index + 1))?;
        let body = match entry {
            ModelLogEntry::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                let decoded = ToolArguments::decode(&arguments);
                Body::ModelToolCall(ModelToolCall {
                    call_id,
                    name,
                    arguments,
                    sandbox_permissions: decoded.sandbox_permissions,
                    justification: decoded.justification,
                })
            }
            ModelLogEntry::ToolOutput { call_id, output } => {
                Body::ModelToolOutput(ModelToolOutput { call_id, output })
            }
            // What the user said is the driver's evidence (on the wire), not the model's.
            ModelLogEntry::UserInput { .. } => continue,
        };
        log.emit(Source::Model, body)?;
        count += 1;
    }
    Ok(count)
}

/// Every `plan-write-probe-*` file directly in the workspace, with size and hash.
pub(crate) fn workspace_evidence(workspace: &Path) -> Result<WorkspaceEvidence> {
    let mut probes = Vec::new();
    let entries = std::fs::read_dir(workspace)
        .with_context(|| format!("listing the workspace {}", workspace.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(PROBE_PREFIX) {
            continue;
        }
        let path = entry.path();
        let (size, sha256) = match evidence_file::read(&path, MAX_PROBE_BYTES) {
            Ok(Some(bytes)) => (
                Some(bytes.len() as u64),
                Some(hex::encode(Sha256::digest(&bytes))),
            ),
            // Still evidence that something exists under that name (a directory, a FIFO, a
            // link, a file past the bound).
            _ => (None, None),
        };
        probes.push(ProbeFile {
            path: name,
            exists: true,
            size,
            sha256,
        });
    }
    probes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(WorkspaceEvidence {
        pattern: format!("{PROBE_PREFIX}*"),
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_log_lines_become_model_events_and_probe_files_are_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let model_log = dir.path().join("model-log.jsonl");
        std::fs::write(
            &model_log,
            "{\"type\":\"tool-call\",\"call_id\":\"c1\",\"name\":\"exec_command\",\"arguments\":\"{}\"}\n\
             {\"type\":\"tool-output\",\"call_id\":\"c1\",\"output\":\"Read-only file system\"}\n",
        )
        .unwrap();
        let mut log = EventLog::in_memory("r");
        assert_eq!(append_model_events(&mut log, &model_log).unwrap(), 2);
        assert_eq!(
            append_model_events(&mut log, &dir.path().join("absent")).unwrap(),
            0
        );
        assert!(log.events().iter().all(|e| e.source == Source::Model));

        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        assert!(workspace_evidence(&workspace).unwrap().probes.is_empty());
        std::fs::write(workspace.join("plan-write-probe-ab.txt"), "probe").unwrap();
        std::fs::write(workspace.join("README.md"), "x").unwrap();
        let evidence = workspace_evidence(&workspace).unwrap();
        assert_eq!(evidence.probes.len(), 1);
        assert_eq!(evidence.probes[0].size, Some(5));

        std::fs::write(&model_log, "not json\n").unwrap();
        let err = append_model_events(&mut log, &model_log).unwrap_err();
        assert!(format!("{err:#}").contains("line 1"), "{err:#}");
    }

    /// The driver can leave a FIFO where a probe file or its events would be, and the fake's
    /// model log is beside its app-server: reading them must neither block nor follow a link.
    #[test]
    fn a_fifo_or_a_link_in_place_of_evidence_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let mode = nix::sys::stat::Mode::S_IRWXU;
        let model_log = dir.path().join("model-log.jsonl");
        nix::unistd::mkfifo(&model_log, mode).unwrap();
        let mut log = EventLog::in_memory("r");
        let err = append_model_events(&mut log, &model_log).unwrap_err();
        assert!(
            format!("{err:#}").contains("model-log.jsonl is a FIFO"),
            "{err:#}"
        );
        let events = dir.path().join("events.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &events).unwrap();
        let err = driver::external::read_events(&events).unwrap_err();
        assert!(err.contains("events.jsonl is a symbolic link"), "{err}");

        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        nix::unistd::mkfifo(&workspace.join("plan-write-probe-ab.txt"), mode).unwrap();
        let evidence = workspace_evidence(&workspace).unwrap();
        assert_eq!(evidence.probes.len(), 1, "it exists, unread");
        assert_eq!(evidence.probes[0].size, None);
    }
}
