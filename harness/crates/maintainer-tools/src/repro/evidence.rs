//! What a repro run's event stream shows: the launch's profile argument and how thread/start
//! ended, each with its event seq.

use anyhow::{Context, Result};
use graders::events::{Body, LaunchSummary, SessionRejected, SessionStarted};
use graders::reader::{read_all, ReaderConfig};
use matrix::stages::events::BUBBLEWRAP_PREFIX;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunEvidence {
    /// The launch as the driver recorded it (`run.started`).
    pub(crate) launch: Option<LaunchSummary>,
    /// `(seq, …)` of the first `session.rejected`.
    pub(crate) thread_start_error: Option<(u64, SessionRejected)>,
    /// `(seq, …)` of `session.started`.
    pub(crate) thread_started: Option<(u64, SessionStarted)>,
    /// `(seq, which)`: the bubblewrap Codex uses in the environment, as the harness found it.
    pub(crate) bubblewrap: Option<(u64, String)>,
}

impl RunEvidence {
    /// Read and validate `events.jsonl`.
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let file = graders::evidence_file::open(path, graders::evidence_file::MAX_STREAMED_BYTES)?
            .with_context(|| format!("opening {}: there is none", path.display()))?;
        let events = read_all(std::io::BufReader::new(file), ReaderConfig::default())
            .with_context(|| format!("reading {}", path.display()))?;
        let mut found = RunEvidence {
            launch: None,
            thread_start_error: None,
            thread_started: None,
            bubblewrap: None,
        };
        for event in events {
            match event.body {
                Body::RunStarted(started) => found.launch = Some(started.launch),
                Body::SessionRejected(rejected) if found.thread_start_error.is_none() => {
                    found.thread_start_error = Some((event.seq, rejected));
                }
                Body::SessionStarted(started) => found.thread_started = Some((event.seq, started)),
                Body::Diagnostic(diagnostic) => {
                    if let Some(which) = diagnostic.message.strip_prefix(BUBBLEWRAP_PREFIX) {
                        found.bubblewrap = Some((event.seq, which.to_string()));
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }

    /// The `-c` value that defines the run's permission profile.
    pub(crate) fn profile_override(&self) -> Option<&str> {
        let launch = self.launch.as_ref()?;
        let profile = launch.thread_permissions.as_deref()?;
        let prefix = format!("permissions.{profile}=");
        launch
            .argv
            .iter()
            .map(String::as_str)
            .find(|arg| arg.starts_with(&prefix))
    }
}
