//! Writes [`crate::model_log::ModelLogEntry`] lines: what the scripted model called and what it
//! got back, in the real `function_call_output` formats.

use crate::model_log::ModelLogEntry;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

pub struct ModelLog {
    file: Option<Mutex<BufWriter<File>>>,
}

impl ModelLog {
    pub fn disabled() -> Self {
        Self { file: None }
    }

    /// Open `path` for appending (created if missing): a retry's fresh process adds to the
    /// earlier attempts' entries instead of replacing them.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Some(Mutex::new(BufWriter::new(file))),
        })
    }

    pub fn write(&self, entry: &ModelLogEntry) {
        let Some(file) = &self.file else { return };
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = serde_json::to_writer(&mut *file, entry);
        let _ = file.write_all(b"\n");
        let _ = file.flush();
    }
}

/// Codex's exec tool output as the model sees it.
pub fn exec_output_text(chunk_id: &str, wall: Duration, exit_code: i32, output: &str) -> String {
    let tokens = output.len().div_ceil(4);
    format!(
        "Chunk ID: {chunk_id}\nWall time: {:.4} seconds\nProcess exited with code {exit_code}\nOriginal token count: {tokens}\nOutput:\n{output}",
        wall.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_output_matches_the_recorded_real_text() {
        let text = exec_output_text(
            "144c48",
            Duration::ZERO,
            1,
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n",
        );
        assert_eq!(text, "Chunk ID: 144c48\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 16\nOutput:\nbwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n");
        let refused =
            "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n";
        assert!(exec_output_text("x", Duration::ZERO, 0, refused)
            .contains("Original token count: 20\n"));
    }

    #[test]
    fn a_second_process_appends_to_the_first_ones_model_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model-log.jsonl");
        for call_id in ["a", "b"] {
            ModelLog::create(&path)
                .unwrap()
                .write(&ModelLogEntry::ToolOutput {
                    call_id: call_id.into(),
                    output: "ok".into(),
                });
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains("\"a\"") && text.contains("\"b\""), "{text}");
    }
}
