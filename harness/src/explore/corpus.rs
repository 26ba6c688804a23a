//! The regression corpus: one JSON file per shrunk divergence (`harness/explore-corpus/` in
//! the repository), holding the session and what the real Codex said in it (normalised and
//! compared as the explorer compares). A test replays every scenario on the fake alone
//! against that recording, and on both sides where the real Codex is installed.

use super::session::Session;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The corpus shipped in the repository.
pub fn repository_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("explore-corpus")
}

/// One regression scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the explorer reported when it found it (the divergence of the fake it caught).
    pub found: String,
    pub session: Session,
    /// What the real Codex said, normalised and compared as the explorer compares.
    pub real: Vec<Value>,
}

/// A file name for a divergence of `class`: its words, and a digest of the session.
pub fn file_name(class: &str, session: &Session) -> String {
    use std::hash::{Hash, Hasher};
    let words: String = class
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|w| !w.is_empty())
        .take(8)
        .collect::<Vec<_>>()
        .join("-");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(session)
        .unwrap_or_default()
        .hash(&mut hasher);
    format!("{words}-{:08x}.json", hasher.finish() as u32)
}

pub fn write(dir: &Path, name: &str, scenario: &Scenario) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(scenario)? + "\n";
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// One scenario file.
pub fn read_one(path: &Path) -> Result<Scenario> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Every scenario of `dir`, by file name.
pub fn read_all(dir: &Path) -> Result<Vec<(String, Scenario)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let scenario = read_one(&path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((name, scenario));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Replay `scenario` on the fake alone: where the fake's messages first differ from the real
/// Codex's recorded ones.
pub fn replay_on_fake(
    players: &super::sides::Players,
    scenario: &Scenario,
    root: &Path,
) -> Result<Option<super::compare::MessageDivergence>> {
    let fake = super::side_messages(
        players,
        super::sides::SideKind::Fake,
        &scenario.session,
        root,
    )?;
    // Compared again: a recording made before a comparison rule was added follows it too.
    let real = super::compare::compared(&scenario.real);
    Ok(super::compare::first_divergence(&real, &fake))
}

/// Replay `scenario` on both sides: where the fake's messages first differ from the real
/// Codex's, played now.
pub fn replay_on_both(
    players: &super::sides::Players,
    scenario: &Scenario,
    root: &Path,
) -> Result<Option<super::compare::MessageDivergence>> {
    Ok(super::diverges(players, &scenario.session, root)?.0)
}
