//! Whether a cell's model log is its own, and whether what its app-server read is what the
//! harness wrote for it ([`Inputs`]) (docs/prerequisites.md, "Evidence the driver under test
//! cannot write").
//! Where the driver shares the harness's uid and no mount namespace of its own ("`local`,
//! neither"), it can write every file of its cell folder; the transcript is sealed by the
//! recorder, the one writer of its bytes. The real Codex's mock model API is the harness's too
//! and seals its model log the same way (`codex::mock_api::MockModelApi::seal_model_log`, checked
//! by the events stage). The fake's model log is written by a child whose bytes the harness does
//! not see as they are written, so every model log is also checked against the sealed
//! transcript, in every environment (where the driver cannot reach it, the checks hold by
//! construction):
//!
//! - it exists and is a regular file (the harness created it before any launch);
//! - no launch in the transcript: it is empty (nothing could have written it);
//! - it last changed (its ctime, which no unprivileged process can set) no later than the
//!   transcript's last record: its writers ended with the launches the transcript closes;
//! - every probe file it names carries the probe id of a thread of this transcript (both
//!   writers derive it from the thread id, `fake_app_server::ids::probe_id_for`).
//!
//! A copy of another cell's model log fails the last check (other threads); a copy made after
//! the app-server ended fails the third. What no check here can tell: a model log forged by a
//! driver that reads this cell's own transcript and writes matching ids while its app-server
//! runs — a process of the harness's uid can also read and change the harness's memory, so no
//! file check would settle that.

use graders::evidence_file;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::BufRead;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The probe files' prefix, as the scenarios spell it.
const PROBE_PREFIX: &str = "plan-write-probe-";
/// `probe_id_for`'s length: four bytes of a digest, in hex.
const PROBE_ID_LEN: usize = 8;

/// What the sealed transcript says about the cell, for checking its other evidence.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TranscriptFacts {
    /// Every thread id the app-server named (`threadId`, `thread.id`).
    pub(crate) threads: BTreeSet<String>,
    /// How many launches it records.
    pub(crate) launches: usize,
    /// Its last record's time (unix ms).
    pub(crate) last_time: Option<u64>,
}

impl TranscriptFacts {
    /// Read `transcript` (already checked against its seal). A missing transcript is a cell
    /// whose driver never launched `codex`.
    pub(crate) fn read(transcript: &Path) -> Result<Self, String> {
        let mut facts = TranscriptFacts::default();
        let file = match evidence_file::open(transcript, evidence_file::MAX_STREAMED_BYTES) {
            Ok(Some(file)) => file,
            Ok(None) => return Ok(facts),
            Err(e) => return Err(e.to_string()),
        };
        let mut launches = BTreeSet::new();
        // The recorder bounds the lines and their count (`tap::record`); a line that is not
        // JSON is a `raw` record's neighbour, never the recorder's own: skipped.
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| format!("reading {}: {e}", transcript.display()))?;
            let Ok(record) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if let Some(time) = record.get("time").and_then(Value::as_u64) {
                facts.last_time = Some(facts.last_time.map_or(time, |t| t.max(time)));
            }
            if let Some(launch) = record.get("launch").and_then(Value::as_u64) {
                launches.insert(launch);
            }
            if let Some(message) = record.get("message") {
                collect_threads(message, &mut facts.threads);
            }
        }
        facts.launches = launches.len();
        Ok(facts)
    }
}

fn collect_threads(value: &Value, threads: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("threadId", Value::String(id)) => {
                        threads.insert(id.clone());
                    }
                    ("thread", Value::Object(thread)) => {
                        if let Some(Value::String(id)) = thread.get("id") {
                            threads.insert(id.clone());
                        }
                    }
                    _ => {}
                }
                collect_threads(inner, threads);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_threads(v, threads)),
        _ => {}
    }
}

/// `Ok` when `model_log` can be this cell's, by the checks of this module's header; else what
/// did not match, naming the file.
pub(crate) fn check_model_log(model_log: &Path, facts: &TranscriptFacts) -> Result<(), String> {
    let name = model_log.display();
    let meta = std::fs::symlink_metadata(model_log)
        .map_err(|e| format!("{name}: {e} (the harness created it before the first launch)"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{name} is not a regular file (the harness created one)"
        ));
    }
    if facts.launches == 0 {
        if meta.len() != 0 {
            return Err(format!(
                "{name} holds {} bytes, but the transcript records no launch of the app-server that writes it",
                meta.len()
            ));
        }
        return Ok(());
    }
    let changed_ms =
        (meta.ctime().max(0) as u64) * 1000 + (meta.ctime_nsec().max(0) as u64) / 1_000_000;
    if let Some(last) = facts.last_time {
        if changed_ms > last {
            return Err(format!(
                "{name} changed at {changed_ms} (unix ms), after the transcript's last record at {last}: its writer had ended"
            ));
        }
    }
    let own: BTreeSet<String> = facts
        .threads
        .iter()
        .map(|t| fake_app_server::ids::probe_id_for(t))
        .collect();
    let file = evidence_file::open(model_log, evidence_file::MAX_STREAMED_BYTES)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("reading {name}: it is gone"))?;
    for (index, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|e| format!("reading {name}: {e}"))?;
        let text = String::from_utf8_lossy(&line);
        for id in probe_ids(&text) {
            if !own.contains(id) {
                return Err(format!(
                    "{name} line {}: names the probe file {PROBE_PREFIX}{id}.*, whose id is no thread's of this cell's transcript ({} thread(s): {})",
                    index + 1,
                    facts.threads.len(),
                    facts.threads.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// The probe ids named in `text`: `plan-write-probe-<8 hex>.` (names of another shape, e.g. a
/// test's `plan-write-probe-1.txt`, carry no thread and are not checked).
fn probe_ids(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices(PROBE_PREFIX).filter_map(|(at, _)| {
        let rest = &text[at + PROBE_PREFIX.len()..];
        let id = rest.get(..PROBE_ID_LEN)?;
        let well_formed =
            id.bytes().all(|b| b.is_ascii_hexdigit()) && rest[PROBE_ID_LEN..].starts_with('.');
        well_formed.then_some(id)
    })
}

/// What the harness wrote into the cell folder for the app-server to read (the scenario file,
/// the fake's package): where the driver can write the cell folder, it could change what its
/// app-server plays before launching it. Each file's and folder's identity and ctime, taken
/// before the driver starts; any rewrite, replacement, addition or removal changes one of them
/// and no unprivileged process can set them back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Inputs {
    roots: Vec<std::path::PathBuf>,
    entries: Vec<(std::path::PathBuf, Stamp)>,
}

/// A file's device, inode, size and ctime (s, ns).
type Stamp = (u64, u64, u64, i64, i64);

/// More entries than any input the harness writes: a bound on the walk, not a limit in use.
const MAX_INPUT_ENTRIES: usize = 10_000;

impl Inputs {
    /// Stamp every file and folder below `roots` (a missing root is stamped as missing).
    pub(crate) fn stamp(roots: &[std::path::PathBuf]) -> Result<Self, String> {
        let mut entries = Vec::new();
        let mut pending: Vec<std::path::PathBuf> = roots.to_vec();
        while let Some(path) = pending.pop() {
            if entries.len() >= MAX_INPUT_ENTRIES {
                return Err(format!(
                    "more than {MAX_INPUT_ENTRIES} inputs below {roots:?}"
                ));
            }
            let Some(stamp) = stamp_of(&path)? else {
                entries.push((path, (0, 0, 0, 0, 0)));
                continue;
            };
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                let listing = std::fs::read_dir(&path)
                    .map_err(|e| format!("listing {}: {e}", path.display()))?;
                for entry in listing {
                    let entry = entry.map_err(|e| format!("listing {}: {e}", path.display()))?;
                    pending.push(entry.path());
                }
            }
            entries.push((path, stamp));
        }
        entries.sort();
        Ok(Self {
            roots: roots.to_vec(),
            entries,
        })
    }

    /// `Ok` when nothing stamped changed; else the first path that did, in words.
    pub(crate) fn check_unchanged(&self) -> Result<(), String> {
        let now = Self::stamp(&self.roots)?;
        for (path, before) in &self.entries {
            match now.entries.iter().find(|(p, _)| p == path) {
                Some((_, after)) if after == before => {}
                Some(_) => {
                    return Err(format!(
                        "{} changed after the harness wrote it for the app-server to read",
                        path.display()
                    ))
                }
                None => {
                    return Err(format!(
                        "{} is gone: the harness wrote it for the app-server to read",
                        path.display()
                    ))
                }
            }
        }
        if let Some((path, _)) = now
            .entries
            .iter()
            .find(|(p, _)| !self.entries.iter().any(|(q, _)| q == p))
        {
            return Err(format!(
                "{} appeared among what the harness wrote for the app-server to read",
                path.display()
            ));
        }
        Ok(())
    }
}

fn stamp_of(path: &Path) -> Result<Option<Stamp>, String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some((
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.ctime(),
            meta.ctime_nsec(),
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREAD: &str = "01a2362b-6c5c-77c3-a78b-066caee35167";

    fn transcript(dir: &Path, time: u64) -> std::path::PathBuf {
        let path = dir.join("transcript.jsonl");
        std::fs::write(
            &path,
            format!(
                "{{\"direction\":\"out\",\"time\":1,\"launch\":1,\"message\":{{\"method\":\"thread/started\",\"params\":{{\"thread\":{{\"id\":\"{THREAD}\"}}}}}}}}\n\
                 {{\"kind\":\"exit\",\"launch\":1,\"time\":{time}}}\n"
            ),
        )
        .unwrap();
        path
    }

    fn model_log(dir: &Path, probe_id: &str) -> std::path::PathBuf {
        let path = dir.join("model-log.jsonl");
        std::fs::write(
            &path,
            format!("{{\"type\":\"tool-call\",\"call_id\":\"c\",\"name\":\"exec_command\",\"arguments\":\"printf probe > plan-write-probe-{probe_id}.txt\"}}\n"),
        )
        .unwrap();
        path
    }

    #[test]
    fn a_model_log_naming_this_cells_probe_before_the_last_record_is_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let log = model_log(dir.path(), &fake_app_server::ids::probe_id_for(THREAD));
        let facts = TranscriptFacts::read(&transcript(dir.path(), u64::MAX / 2)).unwrap();
        assert_eq!(facts.launches, 1);
        assert!(facts.threads.contains(THREAD));
        check_model_log(&log, &facts).unwrap();
    }

    #[test]
    fn another_threads_probe_a_late_change_or_no_launch_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let facts = TranscriptFacts::read(&transcript(dir.path(), u64::MAX / 2)).unwrap();
        let err = check_model_log(&model_log(dir.path(), "0badc0de"), &facts).unwrap_err();
        assert!(
            err.contains("model-log.jsonl line 1") && err.contains("0badc0de"),
            "{err}"
        );

        let early = TranscriptFacts::read(&transcript(dir.path(), 1)).unwrap();
        let own = model_log(dir.path(), &fake_app_server::ids::probe_id_for(THREAD));
        let err = check_model_log(&own, &early).unwrap_err();
        assert!(err.contains("after the transcript's last record"), "{err}");

        let none = TranscriptFacts::read(&dir.path().join("absent")).unwrap();
        let err = check_model_log(&own, &none).unwrap_err();
        assert!(err.contains("no launch"), "{err}");
        std::fs::write(&own, "").unwrap();
        check_model_log(&own, &none).unwrap();

        std::fs::remove_file(&own).unwrap();
        let err = check_model_log(&own, &facts).unwrap_err();
        assert!(err.contains("model-log.jsonl"), "{err}");
    }

    #[test]
    fn an_input_rewritten_replaced_added_or_removed_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("scenario.toml");
        let package = dir.path().join("package");
        std::fs::create_dir(&package).unwrap();
        std::fs::write(package.join("bwrap"), "bin").unwrap();
        std::fs::write(&scenario, "a = 1").unwrap();
        let roots = [scenario.clone(), package.clone(), dir.path().join("absent")];
        let inputs = Inputs::stamp(&roots).unwrap();
        inputs.check_unchanged().unwrap();

        // Same bytes, written again: the ctime tells.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&scenario, "a = 1").unwrap();
        let err = inputs.check_unchanged().unwrap_err();
        assert!(err.contains("scenario.toml changed"), "{err}");

        let inputs = Inputs::stamp(&roots).unwrap();
        std::fs::write(package.join("extra"), "x").unwrap();
        let err = inputs.check_unchanged().unwrap_err();
        assert!(err.contains("package"), "{err}");

        let inputs = Inputs::stamp(&roots).unwrap();
        std::fs::write(dir.path().join("absent"), "x").unwrap();
        let err = inputs.check_unchanged().unwrap_err();
        assert!(err.contains("absent changed"), "{err}");
    }

    #[test]
    fn only_well_formed_probe_ids_are_read() {
        let ids: Vec<&str> = probe_ids(
            "plan-write-probe-1.txt plan-write-probe-e2ea3523.txt plan-write-probe-e2ea3523x",
        )
        .collect();
        assert_eq!(ids, vec!["e2ea3523"]);
    }
}
