//! Writing a run's event stream: assigns the continuous sequence numbers and the run id, and
//! refuses anything after the terminal event, so every stream the harness writes is one the
//! graders' reader accepts.

use graders::events::{Body, Event, RunEnded, Source};
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    #[error("event after the run terminal (seq {0}): {1:?}")]
    AfterTerminal(u64, graders::events::Kind),
    #[error("writing the event log: {0}")]
    Io(#[from] std::io::Error),
}

/// An append-only event stream for one run.
pub struct EventLog {
    run: String,
    next_seq: u64,
    ended: bool,
    out: Option<BufWriter<std::fs::File>>,
    /// The harness's mark on each line written (`crate::provenance`), where it writes its own
    /// evidence.
    key: Option<std::sync::Arc<crate::provenance::Key>>,
    /// Every event written, kept for in-process grading and reports.
    events: Vec<Event>,
}

impl EventLog {
    /// A log kept in memory only.
    pub fn in_memory(run: &str) -> Self {
        Self {
            run: run.to_string(),
            next_seq: 0,
            ended: false,
            out: None,
            key: None,
            events: Vec::new(),
        }
    }

    /// A log kept in memory and written, line by line, to `path`.
    pub fn to_file(run: &str, path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::File::create(path)?;
        let mut log = Self::in_memory(run);
        log.out = Some(BufWriter::new(file));
        Ok(log)
    }

    /// [`EventLog::to_file`], each line marked with `key` as the harness's own evidence.
    pub fn to_file_marked(
        run: &str,
        path: &Path,
        key: std::sync::Arc<crate::provenance::Key>,
    ) -> std::io::Result<Self> {
        let mut log = Self::to_file(run, path)?;
        log.key = Some(key);
        Ok(log)
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Append one event; the terminal (`run.ended`) closes the log.
    pub fn emit(&mut self, source: Source, body: Body) -> Result<&Event, EventLogError> {
        self.emit_at(source, body, None)
    }

    /// [`EventLog::emit`], observed at `ts_ms` (unix ms) when that is known: the time its wire
    /// line went through the tap, not the time it was translated.
    pub fn emit_at(
        &mut self,
        source: Source,
        body: Body,
        ts_ms: Option<u64>,
    ) -> Result<&Event, EventLogError> {
        if self.ended {
            return Err(EventLogError::AfterTerminal(self.next_seq, body.kind()));
        }
        if matches!(body, Body::RunEnded(_)) {
            self.ended = true;
        }
        let event = match ts_ms {
            Some(ts) => Event::at(ts, self.next_seq, &self.run, source, body),
            None => Event::new(self.next_seq, &self.run, source, body),
        };
        self.next_seq += 1;
        if let Some(out) = self.out.as_mut() {
            let line = serde_json::to_string(&event).map_err(std::io::Error::other)?;
            match &self.key {
                Some(key) => out.write_all(key.mark(&line).as_bytes())?,
                None => out.write_all(line.as_bytes())?,
            }
            out.write_all(b"\n")?;
            if self.ended {
                out.flush()?;
            }
        }
        self.events.push(event);
        Ok(self.events.last().expect("just pushed"))
    }

    /// Write the terminal event.
    pub fn end(&mut self, ended: RunEnded) -> Result<(), EventLogError> {
        self.emit(Source::Harness, Body::RunEnded(ended))
            .map(|_| ())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        match self.out.as_mut() {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
