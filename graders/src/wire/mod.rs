//! Events from the wire: the one translator from a cell's transcript (what the driver and the
//! app-server really said to each other, recorded by the tap) to the run-event stream the
//! graders read. Every driver is graded this way; a driver that also writes run events (the
//! `events` contract) is a second source, compared with the wire ([`compare`]) — where they
//! disagree the cell reports a finding and the wire wins. The rules are documented in
//! `docs/events.md`, "Events from the wire".

pub mod compare;
pub mod items;
pub mod terminal;
pub mod transcript;
mod translate;

use crate::events::{
    Body, CellId, DriverEnded, Mode, PolicyGeneration, ProtocolSetup, RunEnded, Target,
};
pub use terminal::DriverEnd;
pub use transcript::TranscriptError;
pub use translate::decision_of;

/// What the wire cannot show about a run: the cell, the launch the cell asked for, the release
/// whose protocol applies and what the driver declared.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub cell: CellId,
    /// Free-form name of the driver (`run.started.driver`).
    pub driver: String,
    pub mode: Mode,
    pub target: Target,
    pub network_enabled: bool,
    pub policy: PolicyGeneration,
    /// The Codex release whose schema the driver's answers are checked against (the fake: the
    /// release it plays; the real Codex: its version) and the driver's declarations, recorded
    /// in `run.started.protocol`. The default (no release) leaves every answer `unchecked`.
    pub protocol: ProtocolSetup,
}

/// A run's events from the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// `run.started` first; no `run.ended` (the harness appends its evidence, then `terminal`).
    pub events: Vec<Body>,
    /// When the wire line behind each event went through the tap (unix ms), `times[i]` for
    /// `events[i]`; events past its end came from the driver's own events, not the wire.
    pub times: Vec<u64>,
    pub terminal: RunEnded,
    /// Disagreements between the wire and the driver's own events (empty without them).
    pub findings: Vec<String>,
}

/// Translate a transcript. An unreadable transcript is an error naming its line.
pub fn translate(
    transcript: impl std::io::BufRead,
    ctx: &Context,
    driver: &DriverEnd,
) -> Result<Translation, TranscriptError> {
    let records = transcript::read(transcript)?;
    let (mut events, mut times, wire) = translate::events_and_terminal(&records, ctx);
    events.push(Body::DriverEnded(driver_ended(driver)));
    // The process's end went through no tap: 0 leaves the harness to stamp it when written.
    times.push(0);
    Ok(Translation {
        events,
        times,
        terminal: terminal::terminal(&wire, driver),
        findings: Vec::new(),
    })
}

/// `driver.ended`: how the driver's process ended, as the harness saw it.
pub fn driver_ended(driver: &DriverEnd) -> DriverEnded {
    match driver {
        DriverEnd::Exited { code } => DriverEnded::Exited { code: *code },
        DriverEnd::Signaled { signal } => DriverEnded::Signaled { signal: *signal },
        DriverEnd::KilledAtBound { reason } => DriverEnded::KilledAtBound {
            reason: reason.clone(),
        },
        DriverEnd::NotStarted { error } => DriverEnded::NotStarted {
            error: error.clone(),
        },
    }
}

/// A launch's argv as the graders read it (`run.started.launch.argv`): the driver's own
/// arguments, less the `app-server` subcommand and the transport flag `--listen` (how the
/// driver talks to the app-server, not how it is configured). Everything else stays verbatim,
/// so a flag the graders do not know makes the argv unreadable to them, never silently passes.
pub fn launch_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut rest = argv.iter();
    let mut subcommand_seen = false;
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-c" | "--config" => {
                out.push(arg.clone());
                if let Some(value) = rest.next() {
                    out.push(value.clone());
                }
            }
            "app-server" if !subcommand_seen => subcommand_seen = true,
            "--listen" => {
                rest.next();
            }
            _ if arg.starts_with("--listen=") => {}
            _ => out.push(arg.clone()),
        }
    }
    out
}

/// FNV-1a, 64 bits: a stable digest in a few lines (the standard library's hasher is not stable
/// across releases, and the launch identity only has to tell launches apart, not resist anyone).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The launch identity of a wire launch: a digest of the mode, target, working folder, the
/// profile selected on `thread/start`, and the argv with every `permissions.NAME` table's rules
/// left out — so it is independent of the profiles' filesystem and network rules, like the
/// reference driver's.
pub fn launch_identity(
    ctx: &Context,
    argv: &[String],
    thread_permissions: Option<&str>,
    cwd: &str,
) -> String {
    let shape: Vec<String> = argv
        .iter()
        .map(|arg| match arg.split_once('=') {
            Some((key, _)) if key.trim().starts_with("permissions.") => key.trim().to_string(),
            _ => arg.clone(),
        })
        .collect();
    let text = serde_json::json!({
        "mode": ctx.mode,
        "target": ctx.target,
        "cwd": cwd,
        "thread_permissions": thread_permissions,
        "argv": shape,
    })
    .to_string();
    format!("wire-{:016x}", fnv1a(text.as_bytes()))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod exchange_tests;
