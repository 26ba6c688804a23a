//! Where the suites come from. The repository's own `suites.toml`, `baseline.toml` and
//! `scenarios/` are read at run time, so an edit takes effect without a rebuild (a binary built
//! before the edit would otherwise answer "no cell matches the selection" with no hint); a
//! binary run away from its source tree (copied elsewhere, or the tree unreadable to its user)
//! uses the copies built into it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How messages name the shipped files.
pub const SUITES_FILE: &str = "suites.toml";
pub const BASELINE_FILE: &str = "baseline.toml";

/// The copies built into this binary.
const EMBEDDED_SUITES: &str = include_str!("../suites.toml");
const EMBEDDED_BASELINE: &str = include_str!("../baseline.toml");

/// Scenario files that cases name as `file:NAME`, as built into this binary.
const EMBEDDED_SCENARIOS: &[(&str, &str)] = &[
    (
        "transient-startup-failure.toml",
        include_str!("../scenarios/transient-startup-failure.toml"),
    ),
    (
        "escalated-write.toml",
        include_str!("../scenarios/escalated-write.toml"),
    ),
    (
        "escalated-write-review-allow.toml",
        include_str!("../scenarios/escalated-write-review-allow.toml"),
    ),
    (
        "long-message.toml",
        include_str!("../scenarios/long-message.toml"),
    ),
    (
        "sub-agent-turn.toml",
        include_str!("../scenarios/sub-agent-turn.toml"),
    ),
    (
        "retried-stream.toml",
        include_str!("../scenarios/retried-stream.toml"),
    ),
    (
        "codex-log.toml",
        include_str!("../scenarios/codex-log.toml"),
    ),
    (
        "mcp-elicitation-tool.toml",
        include_str!("../scenarios/mcp-elicitation-tool.toml"),
    ),
];

/// A source file bigger than this is refused: the shipped ones are a few tens of KiB.
const MAX_SOURCE_BYTES: u64 = 4 << 20;

/// The shipped suites as this process reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shipped {
    pub suites: &'static str,
    pub baseline: &'static str,
    /// Scenario files by name (`file:NAME`).
    pub scenarios: BTreeMap<String, &'static str>,
    /// The folder they were read from; `None`: the copies built into the binary.
    pub from: Option<PathBuf>,
}

/// The shipped suites: the repository's files when its folder is there and readable, else the
/// built-in copies. Read once per process.
pub(crate) fn shipped() -> &'static Shipped {
    static SHIPPED: OnceLock<Shipped> = OnceLock::new();
    SHIPPED.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        read_from(dir).unwrap_or_else(|| Shipped {
            suites: EMBEDDED_SUITES,
            baseline: EMBEDDED_BASELINE,
            scenarios: EMBEDDED_SCENARIOS
                .iter()
                .map(|(name, text)| (name.to_string(), *text))
                .collect(),
            from: None,
        })
    })
}

/// The suites of the folder `dir` (the `suites` crate's folder of a checkout), if both files are
/// there and readable. The texts live as long as the process (one read per process).
fn read_from(dir: &Path) -> Option<Shipped> {
    let suites = read_bounded(&dir.join(SUITES_FILE), MAX_SOURCE_BYTES, "a suites file").ok()?;
    let baseline = read_bounded(
        &dir.join(BASELINE_FILE),
        MAX_SOURCE_BYTES,
        "a baseline file",
    )
    .ok()?;
    let mut scenarios = BTreeMap::new();
    let scenario_dir = dir.join("scenarios");
    if let Ok(entries) = std::fs::read_dir(&scenario_dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".toml") {
                if let Ok(text) = read_bounded(&entry.path(), MAX_SOURCE_BYTES, "a scenario") {
                    scenarios.insert(name, leak(text));
                }
            }
        }
    }
    Some(Shipped {
        suites: leak(suites),
        baseline: leak(baseline),
        scenarios,
        from: Some(dir.to_path_buf()),
    })
}

/// A regular file's text (a FIFO or a device such as `/dev/zero` would block or grow without
/// end) of at most `max` bytes, in UTF-8; why not, if it is not one (`what` names the kind of
/// file).
pub(crate) fn read_bounded(path: &Path, max: u64, what: &str) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(format!("larger than {what}'s bound of {max} bytes"));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))
}

// The matrix hands out `&'static str` slices of these texts for the process's whole life; they
// are read once, so leaking them costs one copy each.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The text of a scenario file named by a case (`file:NAME`), if the shipped suites have it.
pub fn scenario_file(name: &str) -> Option<&'static str> {
    shipped().scenarios.get(name).copied()
}

/// The names of the shipped scenario files (its test's).
#[cfg(test)]
fn scenario_files() -> impl Iterator<Item = &'static str> {
    shipped().scenarios.keys().map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkout_is_read_at_run_time_and_matches_the_built_in_copy_when_unchanged() {
        let shipped = shipped();
        assert_eq!(
            shipped.from.as_deref(),
            Some(Path::new(env!("CARGO_MANIFEST_DIR")))
        );
        // Only a change made after the build may differ; a test binary is built from the tree.
        assert_eq!(shipped.suites, EMBEDDED_SUITES);
        assert_eq!(shipped.baseline, EMBEDDED_BASELINE);
        let names: Vec<&str> = EMBEDDED_SCENARIOS.iter().map(|(n, _)| *n).collect();
        assert_eq!(scenario_files().collect::<Vec<_>>(), {
            let mut sorted = names.clone();
            sorted.sort();
            sorted
        });
    }

    #[test]
    fn an_edited_checkout_is_what_a_run_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SUITES_FILE), "edited = true\n").unwrap();
        std::fs::write(dir.path().join(BASELINE_FILE), "").unwrap();
        std::fs::create_dir(dir.path().join("scenarios")).unwrap();
        std::fs::write(dir.path().join("scenarios/mine.toml"), "name = \"m\"\n").unwrap();
        let read = read_from(dir.path()).unwrap();
        assert_eq!(read.suites, "edited = true\n");
        assert_eq!(
            read.scenarios.get("mine.toml").copied(),
            Some("name = \"m\"\n")
        );
    }

    #[test]
    fn a_folder_without_the_files_or_with_a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_from(dir.path()), None);
        std::fs::write(dir.path().join(SUITES_FILE), "").unwrap();
        nix_free_fifo(&dir.path().join(BASELINE_FILE));
        assert_eq!(read_from(dir.path()), None);
    }

    // A FIFO in place of a file must not block the read: metadata says it is not a regular
    // file. `mkfifo` is a coreutils program on every machine the tests run on.
    fn nix_free_fifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}
