//! The feature names `codex --enable/--disable NAME` accepts besides the ones `codex features
//! list` lists: legacy aliases (Codex 0.169 accepts `web_search`, the old name of
//! `web_search_request`), recorded per persona as `feature_aliases.txt`. Derived from the binary
//! itself: the candidates are the feature keys its own messages name (`[features].NAME`,
//! `features.NAME`, as in its deprecation notices), each kept only when the binary accepts it
//! (`app-server --disable NAME --print-startup-config` exits 0; an unknown name exits 1 with
//! "Unknown feature flag").

use anyhow::{Context, Result};
use regex::bytes::Regex;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The longest feature name taken for a candidate.
const MAX_NAME: usize = 64;

/// The longest a probe may take (an accepted name prints the start-up config and exits).
const PROBE_BOUND: Duration = Duration::from_secs(10);

/// The names `codex features list` prints (its first column).
pub fn listed_features(program: &Path, home: &Path) -> Result<BTreeSet<String>> {
    let output = scratch_command(program, home)
        .args(["features", "list"])
        .output()
        .with_context(|| format!("running {} features list", program.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} features list failed: {}",
        program.display(),
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The feature keys the binary's own text names (`[features].NAME`, `features.NAME`, as long
/// as the lowercase run goes), but those `listed`.
pub fn candidates(binary: &[u8], listed: &BTreeSet<String>) -> BTreeSet<String> {
    let pattern = Regex::new(r"(?:\[features\]\.|features\.)([a-z][a-z0-9_]*)")
        .expect("the feature-key pattern compiles");
    pattern
        .captures_iter(binary)
        .filter_map(|found| std::str::from_utf8(&found[1]).ok().map(str::to_string))
        // Where the text runs on into a neighbour (`…_requestfeatures`), the match is no
        // name: the binary refuses it when probed.
        .filter(|name| name.len() <= MAX_NAME && !listed.contains(name))
        .collect()
}

/// Whether the binary accepts `--disable NAME`.
fn accepted(program: &Path, home: &Path, name: &str) -> Result<bool> {
    let mut child = scratch_command(program, home)
        .args(["app-server", "--disable", name, "--print-startup-config"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    let status = sandbox::system::wait_bounded(&mut child, PROBE_BOUND)?
        .with_context(|| format!("--disable {name}: no exit within {PROBE_BOUND:?}"))?;
    Ok(status.success())
}

fn scratch_command(program: &Path, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("CODEX_HOME", home)
        .current_dir(home);
    command
}

/// The legacy feature names `program` accepts, found as the module says.
pub fn feature_aliases(program: &Path, scratch: &Path) -> Result<BTreeSet<String>> {
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let listed = listed_features(program, &home)?;
    let binary =
        std::fs::read(program).with_context(|| format!("reading {}", program.display()))?;
    let mut aliases = BTreeSet::new();
    for name in candidates(&binary, &listed) {
        if accepted(program, &home, &name)? {
            aliases.insert(name);
        }
    }
    Ok(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_feature_keys_the_text_names_but_the_listed_ones() {
        let text = b"xx[features].web_search_cached[features].web_searchSet `web_search` to ... features.use_legacy_landlock[features].web_search_request.";
        let listed: BTreeSet<String> = ["web_search_request", "use_legacy_landlock"]
            .into_iter()
            .map(String::from)
            .collect();
        let found: Vec<String> = candidates(text, &listed).into_iter().collect();
        assert_eq!(found, ["web_search", "web_search_cached"]);
    }
}
