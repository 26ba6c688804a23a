//! The simulated sandbox: environment facts decide whether bubblewrap would start (with the
//! exact messages bubblewrap prints); when it would, the command runs without bubblewrap in a
//! read-only copy of the workspace, so refused writes really fail.
//!
//! Limits (documented in docs/scenarios.md): network isolation is not simulated, and a refused
//! write reports `Read-only file system` by rewriting the `Permission denied` the read-only copy
//! produces.

use super::policy::SandboxSpec;
use super::process;
use super::ExecResult;
use crate::scenario::EnvironmentFacts;
use std::path::Path;
use std::time::Duration;

pub(super) const ENOSPC: &str = "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)";
pub(super) const UID_MAP: &str = "bwrap: setting up uid map: Permission denied";
pub(super) const LOOPBACK: &str = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";
pub(super) const HELPER_MISSING: &str =
    "bwrap: execvp codex-linux-sandbox: No such file or directory";

/// The message bubblewrap would print (in the order it meets the failures), or `None` when it
/// would start. `with_helper`: the sandbox execs Codex's helper alias (not the start-up probe).
pub(super) fn launcher_error(
    facts: &EnvironmentFacts,
    unshare_net: bool,
    with_helper: bool,
) -> Option<&'static str> {
    if facts.user_namespaces_unavailable {
        Some(ENOSPC)
    } else if facts.uid_map_refused {
        Some(UID_MAP)
    } else if facts.loopback_refused && unshare_net {
        Some(LOOPBACK)
    } else if facts.helper_missing && with_helper {
        Some(HELPER_MISSING)
    } else {
        None
    }
}

/// Upper bound on the workspace copy, so a huge workspace fails clearly instead of slowly.
const COPY_LIMIT_BYTES: u64 = 64 * 1024 * 1024;

fn copy_tree(from: &Path, to: &Path, budget: &mut u64) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, budget)?;
        } else if kind.is_file() {
            let size = entry.metadata()?.len();
            *budget = budget.checked_sub(size).ok_or_else(|| {
                std::io::Error::other(
                    "workspace larger than the simulated sandbox's 64 MiB copy limit",
                )
            })?;
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn make_read_only(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            make_read_only(&entry.path())?;
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o555))?;
        } else {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o444))?;
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555))
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                make_writable(&entry.path());
            }
        }
    }
}

/// Run a command the simulated sandbox lets start.
pub(super) fn run_without_bwrap(
    argv: &[String],
    cwd: &Path,
    spec: &SandboxSpec,
    merge: bool,
    limit: Duration,
) -> ExecResult {
    let cwd_writable = spec.writable.iter().any(|w| cwd.starts_with(w));
    let (program, rest) = argv
        .split_first()
        .expect("non-empty argv checked by the caller");
    if cwd_writable {
        return match process::run(Path::new(program), rest, cwd, merge, limit, |_| {}) {
            Ok(output) => ExecResult::from_process(output, true),
            Err(err) => ExecResult::launcher_failure(&format!("{program}: {err}")),
        };
    }
    let scratch = match tempfile::Builder::new().prefix("fake-sandbox-").tempdir() {
        Ok(dir) => dir,
        Err(err) => return ExecResult::launcher_failure(&format!("fake sandbox: {err}")),
    };
    let copy = scratch.path().join("workspace");
    let mut budget = COPY_LIMIT_BYTES;
    if let Err(err) = copy_tree(cwd, &copy, &mut budget).and_then(|()| make_read_only(&copy)) {
        return ExecResult::launcher_failure(&format!(
            "fake sandbox: copying {}: {err}",
            cwd.display()
        ));
    }
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755));
    // root ignores file modes: drop to `nobody` so the read-only copy really refuses writes.
    let is_root = std::fs::metadata("/proc/self").map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    let result = process::run(Path::new(program), rest, &copy, merge, limit, |command| {
        if matches!(is_root, Ok(true)) {
            use std::os::unix::process::CommandExt;
            command.uid(65534).gid(65534);
        }
    });
    make_writable(&copy);
    match result {
        Ok(output) => {
            let mut result = ExecResult::from_process(output, true);
            for text in [
                &mut result.stdout,
                &mut result.stderr,
                &mut result.aggregated,
            ] {
                *text = text.replace(": Permission denied", ": Read-only file system");
            }
            result
        }
        Err(err) => ExecResult::launcher_failure(&format!("{program}: {err}")),
    }
}
