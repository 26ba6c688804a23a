//! What a cell's folder stops keeping once the cell has ended: copies and caches no reader, no
//! report and no regrade uses, which made the shipped matrix's evidence folder about five times
//! its size. Nothing the verdict is bound to (`CellEvidence::graded`) is touched, so the
//! binding holds after trimming.
//!
//! Dropped (docs/events.md, "What a cell's folder keeps"):
//! - the real Codex's SQLite databases in its home (`*.sqlite` with their write-ahead logs
//!   `*.sqlite-wal` and `*.sqlite-shm`): Codex's own state, ~1.5 MB a cell; the session as
//!   Codex wrote it stays (`sessions/…/rollout-*.jsonl`), beside the wire and the model log;
//! - the skills Codex copies from its package into its home on every start (`skills/`, ~0.5 MB
//!   and ~50 files a cell): the same for every cell of a release;
//! - `fake-codex-package/`, the copy of this machine's bubblewrap the fake plays Codex's bundled
//!   one with;
//! - folders left empty (the tap's socket folder, Codex's and the driver's unused ones).
//!
//! Compressed: each `.jsonl` and `.log` file of at least [`COMPRESS_FROM_BYTES`] outside the
//! driver's workspace becomes `NAME.gz` (`graders::evidence_file::compress`), which every reader
//! reads back through `NAME` and the binding hashes decompressed: the wire of a delta burst
//! (30 MB) keeps 0.4 MB.
//!
//! The driver wrote below `driver/`: nothing there is followed through a link, each folder on
//! the way is checked to be a folder (everything the cell ran has been killed by now).

use crate::layout::{self, CellEvidence};
use graders::evidence_file;
use std::io;
use std::path::{Path, PathBuf};

/// What one trimming removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Trimmed {
    /// Files removed, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Files compressed, and the bytes that saved.
    pub compressed: u64,
    pub saved: u64,
    /// Empty folders removed.
    pub folders: u64,
}

/// A log or a JSON Lines file this large is compressed once its cell has ended. Measured on the
/// shipped matrix: the files from 32 KiB up are 36 MB of its 80 MB (the model's requests, 120 to
/// 220 KB a real-Codex cell; the wire; the events; Codex's sessions) and keep a tenth of that;
/// a smaller one is read whole in the report anyway.
pub const COMPRESS_FROM_BYTES: u64 = 32 << 10;
const COMPRESSED_SUFFIXES: [&str; 2] = [".jsonl", ".log"];
/// How deep the walks below go: deeper, a driver's folders are left as they are (and the
/// harness's own stack bounded).
const MAX_DEPTH: usize = 32;

/// The real Codex's home inside a cell's folder (`driver/codex/home/.codex`).
const CODEX_HOME: [&str; 4] = [layout::DRIVER, layout::CODEX, "home", ".codex"];
/// Codex's bundled skills, copied into its home.
const CODEX_SKILLS: &str = "skills";
const SQLITE_SUFFIXES: [&str; 3] = [".sqlite", ".sqlite-wal", ".sqlite-shm"];

/// Drop and compress what the module's doc lists in `evidence`, and in each earlier attempt
/// kept under `retries/`. The error names the path that could not be removed or compressed.
pub fn after_cell(evidence: &CellEvidence) -> Result<Trimmed, String> {
    let mut trimmed = Trimmed::default();
    trim_one(&evidence.root, &mut trimmed)?;
    if let Some(retries) = real_dir(&evidence.retries_dir(), &[]) {
        let entries = std::fs::read_dir(&retries)
            .map_err(|e| format!("listing {}: {e}", retries.display()))?;
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                trim_one(&entry.path(), &mut trimmed)?;
            }
        }
    }
    // Earlier attempts' folders are below `retries/`: these walks reach them too. A cell that
    // did not run has no folder.
    if real_dir(&evidence.root, &[]).is_none() {
        return Ok(trimmed);
    }
    let mut failed = None;
    compress_large(&evidence.root, 0, &mut trimmed, &mut failed);
    remove_empty_folders(&evidence.root, 0, &mut trimmed);
    failed.map_or(Ok(trimmed), Err)
}

fn trim_one(root: &Path, trimmed: &mut Trimmed) -> Result<(), String> {
    if let Some(package) = real_dir(root, &[layout::FAKE_CODEX_PACKAGE]) {
        remove(&package, trimmed)?;
    }
    let Some(home) = real_dir(root, &CODEX_HOME) else {
        return Ok(());
    };
    if let Some(skills) = real_dir(&home, &[CODEX_SKILLS]) {
        remove(&skills, trimmed)?;
    }
    remove_databases(&home, trimmed)?;
    Ok(())
}

/// Compress each large log and JSON Lines file below `dir`, except in a driver's workspace
/// (left as the driver left it); the first failure in `failed`, the others still tried.
fn compress_large(dir: &Path, depth: usize, trimmed: &mut Trimmed, failed: &mut Option<String>) {
    let is_workspace = dir.ends_with(Path::new(layout::DRIVER).join(layout::WORKSPACE));
    if depth > MAX_DEPTH || is_workspace {
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            failed.get_or_insert(format!("listing {}: {e}", dir.display()));
            return;
        }
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            compress_large(&path, depth + 1, trimmed, failed);
            continue;
        }
        let compressible = entry
            .file_name()
            .to_str()
            .is_some_and(|n| COMPRESSED_SUFFIXES.iter().any(|s| n.ends_with(s)));
        if kind.is_file() && compressible {
            match evidence_file::compress(&path, COMPRESS_FROM_BYTES) {
                Ok(Some(done)) => {
                    trimmed.compressed += 1;
                    trimmed.saved += done.before.saturating_sub(done.after);
                }
                Ok(None) => {}
                Err(e) => {
                    failed.get_or_insert(format!("compressing: {e}"));
                }
            }
        }
    }
}

/// Remove the folders below `dir` that hold nothing (after their own empty folders went);
/// whether `dir` is empty now.
fn remove_empty_folders(dir: &Path, depth: usize, trimmed: &mut Trimmed) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut empty = true;
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let path = entry.path();
        if is_dir
            && depth < MAX_DEPTH
            && remove_empty_folders(&path, depth + 1, trimmed)
            && std::fs::remove_dir(&path).is_ok()
        {
            trimmed.folders += 1;
        } else {
            empty = false;
        }
    }
    empty
}

/// Codex's databases in its home `home`, with their write-ahead logs.
fn remove_databases(home: &Path, trimmed: &mut Trimmed) -> Result<(), String> {
    let entries =
        std::fs::read_dir(home).map_err(|e| format!("listing {}: {e}", home.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_database = name
            .to_str()
            .is_some_and(|n| SQLITE_SUFFIXES.iter().any(|s| n.ends_with(s)));
        if is_database && entry.file_type().is_ok_and(|t| t.is_file()) {
            remove(&entry.path(), trimmed)?;
        }
    }
    Ok(())
}

/// `root` joined with `parts` when each step is a folder, not a link.
fn real_dir(root: &Path, parts: &[&str]) -> Option<PathBuf> {
    let mut path = root.to_path_buf();
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_dir(&path) {
        return None;
    }
    for part in parts {
        path.push(part);
        if !is_dir(&path) {
            return None;
        }
    }
    Some(path)
}

/// Remove a file or a folder (links inside are removed, never followed), counting what went.
fn remove(path: &Path, trimmed: &mut Trimmed) -> Result<(), String> {
    let (files, bytes) = measure(path);
    let removed = if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Ok(()) => {
            trimmed.files += files;
            trimmed.bytes += bytes;
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("removing {}: {e}", path.display())),
    }
}

fn measure(path: &Path) -> (u64, u64) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (0, 0);
    };
    if !meta.is_dir() {
        return (1, meta.len());
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return (0, 0);
    };
    entries.flatten().fold((0, 0), |(files, bytes), entry| {
        let (f, b) = measure(&entry.path());
        (files + f, bytes + b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: usize) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, vec![b'x'; bytes]).unwrap();
    }

    #[test]
    fn codex_databases_skills_and_the_bubblewrap_copy_go_and_the_evidence_stays() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = CellEvidence::new(dir.path());
        let home = dir.path().join("driver/codex/home/.codex");
        for name in ["state_5.sqlite", "state_5.sqlite-wal", "state_5.sqlite-shm"] {
            write(&home.join(name), 1000);
        }
        write(&home.join("skills/.system/imagegen/SKILL.md"), 500);
        write(
            &dir.path().join("fake-codex-package/codex-resources/bwrap"),
            300,
        );
        let kept = [
            home.join("config.toml"),
            home.join("sessions/2026/12/05/rollout-1.jsonl"),
            dir.path().join("transcript.jsonl"),
            dir.path().join("events.jsonl"),
            dir.path().join("driver/events.jsonl"),
        ];
        for path in &kept {
            write(path, 10);
        }
        // An earlier attempt's folder is trimmed the same way.
        let retry = dir
            .path()
            .join("retries/attempt-1/driver/codex/home/.codex");
        write(&retry.join("logs_2.sqlite-wal"), 50);
        let before = crate::binding::digests(&evidence).unwrap();

        let trimmed = after_cell(&evidence).unwrap();
        assert_eq!(
            trimmed,
            Trimmed {
                files: 6,
                bytes: 3850,
                // The earlier attempt's folder held only the log: its six folders go.
                folders: 6,
                ..Trimmed::default()
            }
        );
        for path in &kept {
            assert!(path.is_file(), "{} was removed", path.display());
        }
        assert!(!home.join("skills").exists());
        assert!(!home.join("state_5.sqlite-wal").exists());
        assert!(!dir.path().join("fake-codex-package").exists());
        assert!(!retry.join("logs_2.sqlite-wal").exists());
        assert_eq!(crate::binding::digests(&evidence).unwrap(), before);
        // Trimming again finds nothing.
        assert_eq!(after_cell(&evidence).unwrap(), Trimmed::default());
    }

    #[test]
    fn large_logs_are_compressed_and_read_back_through_their_names_and_empty_folders_go() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = CellEvidence::new(dir.path());
        let line =
            "{\"dir\":\"in\",\"line\":\"{\\\"method\\\":\\\"item/agentMessage/delta\\\"}\"}\n";
        let large = line.repeat(COMPRESS_FROM_BYTES as usize / line.len() + 1);
        for path in [
            evidence.transcript(),
            evidence.model_requests(),
            evidence.driver_events(),
            dir.path().join("retries/attempt-1/stderr.log"),
        ] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &large).unwrap();
        }
        let workspace_log = evidence.workspace().join("build.log");
        write(&workspace_log, large.len());
        write(&evidence.events(), 100);
        for empty in ["tap/sock", "driver/tmp", "driver/codex/home/.codex/log"] {
            std::fs::create_dir_all(dir.path().join(empty)).unwrap();
        }
        let before = crate::binding::digests(&evidence).unwrap();

        let trimmed = after_cell(&evidence).unwrap();
        assert_eq!(trimmed.compressed, 4, "{trimmed:?}");
        assert!(trimmed.saved > 3 * COMPRESS_FROM_BYTES, "{trimmed:?}");
        assert_eq!(trimmed.folders, 7, "{trimmed:?}");
        assert!(!evidence.transcript().exists());
        assert!(dir.path().join("transcript.jsonl.gz").is_file());
        assert!(dir.path().join("retries/attempt-1/stderr.log.gz").is_file());
        assert!(evidence.events().is_file(), "a small file stays as it is");
        assert!(
            workspace_log.is_file(),
            "the driver's workspace is left alone"
        );
        assert!(!dir.path().join("tap").exists());
        // Every graded file reads back as it was graded: the binding holds.
        assert_eq!(crate::binding::digests(&evidence).unwrap(), before);
        let read = graders::evidence_file::read(&evidence.transcript(), u64::MAX).unwrap();
        assert_eq!(read.unwrap(), large.as_bytes());
    }

    #[test]
    fn a_link_the_driver_left_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let outside = elsewhere.path().join("home/.codex");
        write(&outside.join("state_5.sqlite"), 10);
        write(&outside.join("skills/a"), 10);
        std::fs::create_dir_all(dir.path().join("driver")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("driver/codex")).unwrap();
        let trimmed = after_cell(&CellEvidence::new(dir.path())).unwrap();
        assert_eq!(trimmed, Trimmed::default());
        assert!(outside.join("state_5.sqlite").is_file());
        assert!(outside.join("skills/a").is_file());
    }
}
