//! The files a container sees in place of the host's: what becomes of the bubblewraps Codex may
//! use ([`BwrapAccess`]), a passwd entry for a non-root uid, and which bubblewraps those are
//! (the system one, and Codex's bundled ones where their packages are declared). Shared by both runtimes (runc binds them in the bundle, Docker in its
//! container), so an environment looks the same on either.

use crate::spec::BwrapAccess;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The Debian bubblewrap Codex prefers when it exists.
pub const SYSTEM_BWRAP: &str = "/usr/bin/bwrap";
/// How deep below a driver's install folder a Codex package's `codex-resources/bwrap` is looked
/// for (an npm install prefix: `node_modules/@openai/codex-linux-x64/vendor/<target>/` is five
/// levels down).
pub const INSTALL_SEARCH_DEPTH: usize = 6;

/// The bundled bubblewrap of the Codex executable at `codex`: `codex-resources/bwrap` in the
/// folder above the executable's (whether it exists or not).
pub fn codex_bundled_bwrap(codex: &Path) -> PathBuf {
    codex
        .parent()
        .and_then(Path::parent)
        .map(|package| package.join("codex-resources").join("bwrap"))
        .unwrap_or_default()
}

/// Every `codex-resources/bwrap` in the install folder `install` or below it, at most
/// [`INSTALL_SEARCH_DEPTH`] folders down (no symbolic links followed): the bundled bubblewraps
/// of the Codex packages a driver's install carries. Only for a folder known to be an install
/// (a published driver's package below the harness cache, an installation of its own): never
/// for a folder that is merely bound, such as the drivers file's, which may hold anything —
/// earlier runs' evidence among it.
pub fn bundled_bwraps_in_install(install: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    bundled_bwraps_below(install, INSTALL_SEARCH_DEPTH, &mut found);
    found
}

fn bundled_bwraps_below(folder: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let bundled = folder.join("codex-resources").join("bwrap");
    if bundled.is_file() && !found.contains(&bundled) {
        found.push(bundled);
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            bundled_bwraps_below(&entry.path(), depth - 1, found);
        }
    }
}

/// Every bubblewrap Codex may use in a container: the system one (`system` decides whether it
/// is named when the host has none), the bundled one of the package of the `program` started
/// there (when known), and the `declared` bundled ones of the packages bound in — each once,
/// and only files that exist.
pub fn bwrap_targets(
    system: SystemBwrap,
    program: Option<&Path>,
    declared: &[PathBuf],
) -> Vec<PathBuf> {
    let mut targets = Vec::new();
    let system_bwrap = PathBuf::from(SYSTEM_BWRAP);
    if system == SystemBwrap::Always || system_bwrap.is_file() {
        targets.push(system_bwrap);
    }
    let bundled = program.map(codex_bundled_bwrap);
    for candidate in bundled.iter().chain(declared) {
        if candidate.is_file() && !targets.contains(candidate) {
            targets.push(candidate.clone());
        }
    }
    targets
}

/// Whether [`bwrap_targets`] names the system bubblewrap when the host has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemBwrap {
    /// Only when the host has it (runc binds the host root: nothing to cover otherwise).
    IfPresent,
    /// Always (Docker binds the host's userland folders into an empty image: covering the path
    /// costs an empty bind).
    Always,
}

/// `(source, destination)` file binds that make the bubblewraps in `targets` what `access`
/// says; the sources are created in `dir` (the bundle, or the Docker launcher's folder).
pub fn bwrap_overlays(
    environment: &str,
    access: BwrapAccess,
    targets: &[PathBuf],
    dir: &Path,
) -> Result<Vec<(PathBuf, PathBuf)>> {
    let chosen: Vec<&PathBuf> = match access {
        BwrapAccess::Usable => return Ok(Vec::new()),
        BwrapAccess::ExecuteOnly | BwrapAccess::AllHidden => targets.iter().collect(),
        BwrapAccess::SystemHidden => targets
            .iter()
            .filter(|t| t.as_path() == Path::new(SYSTEM_BWRAP))
            .collect(),
    };
    if chosen.is_empty() {
        bail!(
            "environment `{environment}` changes a bubblewrap, and neither {SYSTEM_BWRAP} nor a Codex codex-resources/bwrap was found"
        );
    }
    let mut overlays = Vec::new();
    for (index, target) in chosen.into_iter().enumerate() {
        let source = dir.join(format!("bwrap-overlay-{index}"));
        if access == BwrapAccess::ExecuteOnly {
            std::fs::copy(target, &source)
                .with_context(|| format!("copying {}", target.display()))?;
            // Executable but unreadable: exec by a non-root uid makes it non-dumpable.
            std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o711))?;
        } else {
            // An empty file nobody may execute: a PATH lookup (the shell's, Codex's) skips it,
            // as if bubblewrap were not installed (a file cannot be unbound from a read-only root).
            std::fs::write(&source, b"")?;
            std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o644))?;
        }
        overlays.push((source, target.clone()));
    }
    Ok(overlays)
}

/// The name a container's non-root uid gets when the host has no passwd entry for it.
const SANDBOX_USER: &str = "sandbox";

/// `host` (an `/etc/passwd`) with an entry for `uid`, when it has none: Codex picks the shell of
/// its commands from the uid's passwd entry (`/bin/bash`), and without one falls back to a PATH
/// search (`/usr/bin/bash`), so the environments would differ between machines.
pub fn passwd_with(host: &str, uid: u32, gid: u32) -> Option<String> {
    let known = host
        .lines()
        .any(|line| line.split(':').nth(2) == Some(uid.to_string().as_str()));
    if uid == 0 || known {
        return None;
    }
    let mut text = host.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "{SANDBOX_USER}:x:{uid}:{gid}::/nonexistent:/bin/bash\n"
    ));
    Some(text)
}

/// `(source, /etc/passwd)` when the host's passwd lacks the container's uid (see [`passwd_with`]).
pub fn passwd_overlay(uid: u32, gid: u32, dir: &Path) -> Result<Option<(PathBuf, PathBuf)>> {
    let host = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some(text) = passwd_with(&host, uid, gid) else {
        return Ok(None);
    };
    let source = dir.join("passwd");
    std::fs::write(&source, text)?;
    std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o644))?;
    Ok(Some((source, PathBuf::from("/etc/passwd"))))
}

#[cfg(test)]
mod tests {
    use super::passwd_with;

    #[test]
    fn a_uid_without_passwd_entry_gets_one_with_bash() {
        let host =
            "root:x:0:0:root:/root:/bin/bash\ncloudsdk:x:1000:1000::/home/cloudsdk:/bin/bash\n";
        assert_eq!(passwd_with(host, 1000, 1000), None);
        assert_eq!(passwd_with(host, 0, 0), None);
        let added = passwd_with(host, 1001, 1001).unwrap();
        assert!(added.starts_with(host));
        assert!(added.ends_with("sandbox:x:1001:1001::/nonexistent:/bin/bash\n"));
    }
}
