//! The events the harness appends after the driver: what the model was told (from the model
//! log) and the workspace evidence (the write-probe files).

use anyhow::{Context, Result};
use driver::event_log::EventLog;
use fake_app_server::model_log::ModelLogEntry;
use graders::events::{Body, ModelToolCall, ModelToolOutput, ProbeFile, Source, WorkspaceEvidence};
use graders::tool_call::ToolArguments;
use sha2::{Digest, Sha256};
use std::io::BufRead;
use std::path::Path;

/// The files a write probe creates in the workspace.
pub const PROBE_PREFIX: &str = "plan-write-probe-";
/// Longest model-log line accepted (tool outputs are excerpts; a longer line is a broken log).
const MAX_MODEL_LOG_LINE: usize = 1 << 20;

/// Append one `model.*` event per model-log line. A missing log means the model was never
/// reached (e.g. the session never opened): nothing to append.
pub fn append_model_events(log: &mut EventLog, model_log: &Path) -> Result<usize> {
    let file = match std::fs::File::open(model_log) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", model_log.display())),
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
        };
        log.emit(Source::Model, body)?;
        count += 1;
    }
    Ok(count)
}

/// Every `plan-write-probe-*` file directly in the workspace, with size and hash.
pub fn workspace_evidence(workspace: &Path) -> Result<WorkspaceEvidence> {
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
        let (size, sha256) = match std::fs::read(&path) {
            Ok(bytes) => (
                Some(bytes.len() as u64),
                Some(hex::encode(Sha256::digest(&bytes))),
            ),
            // Still evidence that something exists under that name (e.g. a directory).
            Err(_) => (None, None),
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
}
