//! Stage 5: the run's events. For a driver process they come from the wire (the transcript the
//! tap recorded, through `graders::wire`), compared with the driver's own events when it
//! writes them; every disagreement is a finding (a `diagnostic` in the log and a line in
//! `findings.json`), and the wire wins. Then the harness's own evidence: what the model was
//! told, and the workspace's probe files.

use anyhow::{Context, Result};
use driver::event_log::EventLog;
use graders::events::{Body, Diagnostic, Level, RunEnded, Source};
use graders::wire::{self, DriverEnd};
use std::path::Path;

/// Translate the transcript into `log` (which must be empty) and return the run's terminal.
pub fn from_wire(
    log: &mut EventLog,
    ctx: &wire::Context,
    transcript: &Path,
    end: &DriverEnd,
    driver_events: Option<&Path>,
    findings_file: &Path,
) -> Result<RunEnded> {
    let file = match std::fs::File::open(transcript) {
        Ok(file) => file,
        // No launch at all: the driver never ran `codex`.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::File::open("/dev/null").context("opening /dev/null")?
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", transcript.display())),
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
