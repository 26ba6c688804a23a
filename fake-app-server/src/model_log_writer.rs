//! Writes [`crate::model_log::ModelLogEntry`] lines: what the scripted model called and what it
//! got back, in the real `function_call_output` formats.

use crate::model_log::ModelLogEntry;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

pub(crate) struct ModelLog {
    file: Option<Mutex<BufWriter<File>>>,
}

impl ModelLog {
    pub(crate) fn disabled() -> Self {
        Self { file: None }
    }

    /// Open `path` for appending (created if missing): a retry's fresh process adds to the
    /// earlier attempts' entries instead of replacing them.
    pub(crate) fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Some(Mutex::new(BufWriter::new(file))),
        })
    }

    pub(crate) fn write(&self, entry: &ModelLogEntry) {
        let Some(file) = &self.file else { return };
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = serde_json::to_writer(&mut *file, entry);
        let _ = file.write_all(b"\n");
        let _ = file.flush();
    }
}

/// What Codex 0.169 tells the model when approval policy `never` forbids an escalation.
pub(crate) const APPROVAL_NEVER_OUTPUT: &str = "approval policy is Never; reject command — you cannot ask for escalated permissions if the approval policy is Never";

/// What Codex tells the model when an escalation was rejected (by the user: `rejected by
/// user`; by the automatic reviewer: its denial text). Codex writes the error with Rust's debug
/// formatting, twice nested (measured with 0.169), which `{:?}` reproduces exactly.
pub(crate) fn rejected_output(reason: &str) -> String {
    let rejected = format!("Rejected({reason:?})");
    format!("exec_command failed: CreateProcess {{ message: {rejected:?} }}")
}

/// Whether a tool output is one of Codex's refusals of an escalation ([`APPROVAL_NEVER_OUTPUT`],
/// [`rejected_output`]): the command never ran.
pub(crate) fn is_rejected_escalation(output: &str) -> bool {
    output == APPROVAL_NEVER_OUTPUT
        || (output.starts_with("exec_command failed: CreateProcess { message: \"Rejected(")
            && output.ends_with(")\" }"))
}

/// Codex's exec tool output as the model sees it.
pub(crate) fn exec_output_text(
    chunk_id: &str,
    wall: Duration,
    exit_code: i32,
    output: &str,
) -> String {
    let tokens = output.len().div_ceil(4);
    format!(
        "Chunk ID: {chunk_id}\nWall time: {:.4} seconds\nProcess exited with code {exit_code}\nOriginal token count: {tokens}\nOutput:\n{output}",
        wall.as_secs_f64()
    )
}

/// The exit code and output of a process result written by Codex (header lines, `Process
/// exited with code N`, …, then `Output:` and the merged output; [`exec_output_text`]); `None`
/// for any other text (a refused escalation, a command that could not be started).
pub(crate) fn parse_exec_output(text: &str) -> Option<(i64, String)> {
    let exit = text
        .lines()
        .find_map(|line| line.strip_prefix("Process exited with code "))
        .and_then(|code| code.trim().parse::<i64>().ok())?;
    Some(match text.split_once("\nOutput:\n") {
        Some((_, output)) => (exit, output.to_string()),
        None => (exit, String::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_read_as_codex_writes_them() {
        // Recorded from Codex 0.169 (a declined approval; the automatic reviewer's denial).
        let user = rejected_output("rejected by user");
        assert_eq!(
            user,
            "exec_command failed: CreateProcess { message: \"Rejected(\\\"rejected by user\\\")\" }"
        );
        let review = rejected_output("risky.\nReason: no");
        assert!(
            review.contains("Rejected(\\\"risky.\\\\nReason: no\\\")"),
            "{review}"
        );
        for text in [user.as_str(), review.as_str(), APPROVAL_NEVER_OUTPUT] {
            assert!(is_rejected_escalation(text), "{text}");
            assert_eq!(parse_exec_output(text), None);
        }
        let ran = exec_output_text("c", Duration::ZERO, 1, "x: Read-only file system\n");
        assert!(!is_rejected_escalation(&ran));
        assert_eq!(
            parse_exec_output(&ran),
            Some((1, "x: Read-only file system\n".into()))
        );
        assert_eq!(
            parse_exec_output("Process exited with code 0\n"),
            Some((0, String::new()))
        );
    }

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
