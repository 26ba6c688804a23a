//! Codex's `apply_patch` tool as the fake plays it: the patch text the model writes, the
//! `fileChange` item's changes, the git-style `turn/diff/updated` text and the tool output the
//! model gets back (all measured with Codex 0.169: an `apply_patch` adding `probe.txt` to a
//! read-only workspace under `on-request`).
//!
//! The fake plays `*** Add File:` and `*** Delete File:` hunks: enough for the write probes of
//! the protocol cases. `*** Update File:` hunks are refused when the scenario loads.

use sha1::{Digest, Sha1};
use std::path::{Path, PathBuf};

/// One hunk of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    Add { path: String, content: String },
    Delete { path: String },
}

impl Hunk {
    pub fn path(&self) -> &str {
        match self {
            Hunk::Add { path, .. } | Hunk::Delete { path } => path,
        }
    }
}

/// Parse the model's patch text (the tool's lark grammar, Add and Delete hunks).
pub(crate) fn parse(text: &str) -> Result<Vec<Hunk>, String> {
    let mut lines = text.lines().peekable();
    if lines.next() != Some("*** Begin Patch") {
        return Err("a patch starts with `*** Begin Patch`".into());
    }
    let mut hunks = Vec::new();
    loop {
        let Some(line) = lines.next() else {
            return Err("a patch ends with `*** End Patch`".into());
        };
        if line == "*** End Patch" {
            break;
        }
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let mut content = String::new();
            while let Some(next) = lines.peek() {
                let Some(added) = next.strip_prefix('+') else {
                    break;
                };
                content.push_str(added);
                content.push('\n');
                lines.next();
            }
            if content.is_empty() {
                return Err(format!("`*** Add File: {path}` adds no `+` line"));
            }
            hunks.push(Hunk::Add {
                path: path.to_string(),
                content,
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            hunks.push(Hunk::Delete {
                path: path.to_string(),
            });
        } else if line.starts_with("*** Update File: ") {
            return Err(
                "the fake plays `*** Add File:` and `*** Delete File:` hunks only".to_string(),
            );
        } else {
            return Err(format!("unexpected patch line `{line}`"));
        }
    }
    if hunks.is_empty() {
        return Err("the patch has no hunk".into());
    }
    Ok(hunks)
}

/// A hunk resolved against the workspace: what the `fileChange` item shows and what applying
/// it does.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub hunk: Hunk,
    pub absolute: PathBuf,
    /// The path `turn/diff/updated` names: relative to the git root around the workspace
    /// ([`diff_root`]), else to the workspace.
    pub diff_path: String,
    /// A deleted file's content as it was (empty when it did not exist).
    pub old_content: String,
}

/// Where Codex 0.169 roots a turn's diff: the nearest folder, the workspace or above it, that
/// holds a `.git` (a repository's folder, a worktree's file, or an empty folder: measured with
/// `harness explore` and an empty `.git` above the workspace), else the workspace itself. The
/// file change items keep absolute paths.
pub(crate) fn diff_root(cwd: &Path) -> &Path {
    cwd.ancestors()
        .find(|folder| folder.join(".git").symlink_metadata().is_ok())
        .unwrap_or(cwd)
}

pub(crate) fn resolve(hunks: &[Hunk], cwd: &Path) -> Vec<Change> {
    let root = diff_root(cwd);
    hunks
        .iter()
        .map(|hunk| {
            let absolute = cwd.join(hunk.path());
            let diff_path = absolute
                .strip_prefix(root)
                .map(|relative| relative.display().to_string())
                .unwrap_or_else(|_| hunk.path().to_string());
            let old_content = match hunk {
                Hunk::Delete { .. } => std::fs::read_to_string(&absolute).unwrap_or_default(),
                Hunk::Add { .. } => String::new(),
            };
            Change {
                hunk: hunk.clone(),
                absolute,
                diff_path,
                old_content,
            }
        })
        .collect()
}

impl Change {
    /// The item's `changes` entry: an added file shows its content, a deleted one its old
    /// content.
    pub(crate) fn item_change(&self) -> serde_json::Value {
        let (kind, diff) = match &self.hunk {
            Hunk::Add { content, .. } => ("add", content.as_str()),
            Hunk::Delete { .. } => ("delete", self.old_content.as_str()),
        };
        serde_json::json!({"path": self.absolute.display().to_string(), "kind": {"type": kind}, "diff": diff})
    }

    /// The legacy `applyPatchApproval` form (`fileChanges` by path).
    pub(crate) fn legacy_change(&self) -> serde_json::Value {
        match &self.hunk {
            Hunk::Add { content, .. } => serde_json::json!({"type": "add", "content": content}),
            Hunk::Delete { .. } => {
                serde_json::json!({"type": "delete", "content": self.old_content})
            }
        }
    }

    fn apply(&self) -> std::io::Result<()> {
        match &self.hunk {
            Hunk::Add { content, .. } => {
                if let Some(parent) = self.absolute.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&self.absolute, content)
            }
            Hunk::Delete { .. } => std::fs::remove_file(&self.absolute),
        }
    }

    /// The git-style diff of this change, as Codex's `turn/diff/updated` writes it.
    fn git_diff(&self) -> String {
        let path = &self.diff_path;
        let zero = "0".repeat(40);
        let (header, index, from, to, range, body) = match &self.hunk {
            Hunk::Add { content, .. } => (
                "new file mode 100644",
                format!("{zero}..{}", blob_id(content)),
                "/dev/null".to_string(),
                format!("b/{path}"),
                format!("@@ -0,0 +{} @@", line_range(content)),
                prefixed(content, '+'),
            ),
            Hunk::Delete { .. } => (
                "deleted file mode 100644",
                format!("{}..{zero}", blob_id(&self.old_content)),
                format!("a/{path}"),
                "/dev/null".to_string(),
                format!("@@ -{} +0,0 @@", line_range(&self.old_content)),
                prefixed(&self.old_content, '-'),
            ),
        };
        format!("diff --git a/{path} b/{path}\n{header}\nindex {index}\n--- {from}\n+++ {to}\n{range}\n{body}")
    }
}

/// Apply every change; the first failure is reported with its path.
pub(crate) fn apply(changes: &[Change]) -> Result<(), String> {
    for change in changes {
        change
            .apply()
            .map_err(|e| format!("{}: {e}", change.absolute.display()))?;
    }
    Ok(())
}

/// The turn's diff after these changes were applied (`turn/diff/updated`'s `diff`).
/// A file the turn added and then deleted shows nothing (measured with 0.169: the diff after
/// the delete is empty).
pub(crate) fn turn_diff(changes: &[Change]) -> String {
    let added_then_deleted = |path: &str| {
        let mut of_path = changes.iter().filter(|c| c.hunk.path() == path);
        matches!(of_path.next().map(|c| &c.hunk), Some(Hunk::Add { .. }))
            && matches!(
                of_path.next_back().map(|c| &c.hunk),
                Some(Hunk::Delete { .. })
            )
    };
    let mut sorted: Vec<&Change> = changes
        .iter()
        .filter(|c| !added_then_deleted(c.hunk.path()))
        .collect();
    sorted.sort_by(|a, b| a.diff_path.cmp(&b.diff_path));
    sorted.iter().map(|c| c.git_diff()).collect()
}

/// What the model is told after the patch applied: Codex 0.169's text.
pub(crate) fn success_output(changes: &[Change], wall: std::time::Duration) -> String {
    let files: String = changes
        .iter()
        .map(|c| {
            let letter = match c.hunk {
                Hunk::Add { .. } => 'A',
                Hunk::Delete { .. } => 'D',
            };
            format!("{letter} {}\n", c.hunk.path())
        })
        .collect();
    format!(
        "Exit code: 0\nWall time: {:.1} seconds\nOutput:\nSuccess. Updated the following files:\n{files}",
        wall.as_secs_f64()
    )
}

/// What the model is told when the user declined the patch (Codex 0.169).
pub(crate) const DECLINED_OUTPUT: &str = "patch rejected by user";
/// What the model is told when a read-only sandbox refuses the patch and the approval policy
/// forbids asking (Codex 0.169, `approvalPolicy: never`).
pub(crate) const READ_ONLY_NEVER_OUTPUT: &str =
    "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings";

/// Git's blob id: the SHA-1 of `blob <len>\0<content>`.
fn blob_id(content: &str) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", content.len()).as_bytes());
    hasher.update(content.as_bytes());
    hex::encode(hasher.finalize())
}

fn line_range(content: &str) -> String {
    match content.lines().count() {
        1 => "1".to_string(),
        n => format!("1,{n}"),
    }
}

fn prefixed(content: &str, sign: char) -> String {
    content.lines().map(|l| format!("{sign}{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = "*** Begin Patch\n*** Add File: probe.txt\n+probe\n*** End Patch\n";

    /// The diff Codex 0.169 sent in `turn/diff/updated` for PROBE (recorded).
    #[test]
    fn an_added_file_diffs_as_the_real_codex_writes_it() {
        let hunks = parse(PROBE).unwrap();
        let changes = resolve(&hunks, Path::new("/ws"));
        assert_eq!(
            turn_diff(&changes),
            "diff --git a/probe.txt b/probe.txt\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..da0c4eb8d9a48d171a33574b380752e183286751\n--- /dev/null\n+++ b/probe.txt\n@@ -0,0 +1 @@\n+probe\n"
        );
        assert_eq!(
            changes[0].item_change(),
            serde_json::json!({"path": "/ws/probe.txt", "kind": {"type": "add"}, "diff": "probe\n"})
        );
        assert_eq!(
            success_output(&changes, std::time::Duration::from_millis(100)),
            "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:\nA probe.txt\n"
        );
    }

    #[test]
    fn patches_apply_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let changes = resolve(&parse(PROBE).unwrap(), dir.path());
        apply(&changes).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("probe.txt")).unwrap(),
            "probe\n"
        );
        let delete = resolve(
            &parse("*** Begin Patch\n*** Delete File: probe.txt\n*** End Patch").unwrap(),
            dir.path(),
        );
        assert_eq!(delete[0].old_content, "probe\n");
        assert!(turn_diff(&delete).contains("deleted file mode 100644\nindex da0c4eb"));
        apply(&delete).unwrap();
        assert!(!dir.path().join("probe.txt").exists());
        let update = parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n");
        assert!(update.unwrap_err().contains("Add File"));
        assert!(parse("*** Begin Patch\n*** End Patch\n")
            .unwrap_err()
            .contains("no hunk"));
        assert!(parse("hello").unwrap_err().contains("Begin Patch"));
    }

    /// The turn diff after deleting a file the same turn added (measured with 0.169: empty).
    #[test]
    fn a_file_added_then_deleted_in_a_turn_leaves_no_diff() {
        let dir = tempfile::tempdir().unwrap();
        // The diff's root is the nearest folder holding `.git`: this one, whatever lies above
        // the machine's temporary folder (the real Codex leaves an empty /tmp/.git behind).
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let mut changes = resolve(&parse(PROBE).unwrap(), dir.path());
        apply(&changes).unwrap();
        let delete = "*** Begin Patch\n*** Delete File: probe.txt\n*** End Patch";
        changes.extend(resolve(&parse(delete).unwrap(), dir.path()));
        assert_eq!(turn_diff(&changes), "");
        let other = "*** Begin Patch\n*** Add File: other.txt\n+other\n*** End Patch\n";
        changes.extend(resolve(&parse(other).unwrap(), dir.path()));
        assert!(turn_diff(&changes).starts_with("diff --git a/other.txt b/other.txt\n"));
    }

    /// Measured with Codex 0.169 (`harness explore`, the workspace below a repository, below an
    /// empty `.git`, and below a worktree's `.git` file): the turn's diff names the file from the
    /// folder holding `.git`; the fake named it from the workspace.
    #[test]
    fn a_turn_diff_names_files_from_the_git_root_around_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("repo/sub/ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(dir.path().join("repo/.git")).unwrap();
        let hunks = parse(PROBE).unwrap();
        let diff = turn_diff(&resolve(&hunks, &ws));
        assert!(
            diff.starts_with("diff --git a/sub/ws/probe.txt b/sub/ws/probe.txt\n"),
            "{diff}"
        );
        assert!(diff.contains("+++ b/sub/ws/probe.txt\n"), "{diff}");
        // The nearest one wins, a `.git` file (a worktree's) as well as a folder.
        std::fs::write(dir.path().join("repo/sub/.git"), "gitdir: elsewhere\n").unwrap();
        let diff = turn_diff(&resolve(&hunks, &ws));
        assert!(diff.starts_with("diff --git a/ws/probe.txt"), "{diff}");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let changes = resolve(&hunks, &ws);
        assert!(turn_diff(&changes).starts_with("diff --git a/probe.txt"));
        // The item keeps the absolute path.
        assert_eq!(
            changes[0].item_change()["path"],
            ws.join("probe.txt").display().to_string()
        );
    }
}
