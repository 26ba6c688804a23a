//! bubblewrap argument vectors equivalent to the ones Codex 0.169.0 uses (see the sandbox facts
//! doc): a user namespace always, a network namespace when network is off.

use super::policy::SandboxSpec;
use std::path::{Path, PathBuf};

/// The platform minimum Codex calls `:minimal`.
pub const MINIMAL_DIRS: &[&str] = &["/bin", "/etc", "/lib", "/lib64", "/sbin", "/usr"];

/// Codex's start-up probe.
pub fn probe_args() -> Vec<String> {
    [
        "--unshare-user",
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "/bin/true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn push_bind(args: &mut Vec<String>, flag: &str, path: &Path) {
    let shown = path.display().to_string();
    args.extend([flag.to_string(), shown.clone(), shown]);
}

/// Filesystem, namespace and process arguments up to (not including) `--`.
pub fn sandbox_args(spec: &SandboxSpec, chdir: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["--new-session".into(), "--die-with-parent".into()];
    match &spec.readable {
        None => push_bind(&mut args, "--ro-bind", Path::new("/")),
        Some(paths) => {
            args.extend(["--tmpfs".to_string(), "/".to_string()]);
            if spec.minimal_readable {
                for dir in MINIMAL_DIRS {
                    if Path::new(dir).exists() {
                        push_bind(&mut args, "--ro-bind", Path::new(dir));
                    }
                }
            }
            for path in paths.iter().filter(|p| p.exists()) {
                push_bind(&mut args, "--ro-bind", path);
            }
            // Codex binds its per-process helper alias folder too (observed with 0.169: the
            // folder under `$CODEX_HOME/tmp/arg0-linux/`), so `~/.codex` shows in the empty root
            // as a folder of the sandbox's own tmpfs, empty but for that folder.
            if spec.minimal_readable {
                if let Some(folder) = ensure_helper_alias_folder() {
                    push_bind(&mut args, "--ro-bind", &folder);
                }
            }
        }
    }
    args.extend(["--dev".to_string(), "/dev".to_string()]);
    for path in spec.writable.iter().filter(|p| p.exists()) {
        push_bind(&mut args, "--bind", path);
    }
    args.extend(
        ["--unshare-user", "--unshare-pid", "--unshare-ipc"]
            .iter()
            .map(|s| s.to_string()),
    );
    if !spec.network {
        args.push("--unshare-net".into());
    }
    args.extend(["--proc".to_string(), "/proc".to_string()]);
    args.extend(["--chdir".to_string(), chdir.display().to_string()]);
    args
}

/// The fs helper thread/start runs to read AGENTS.md under restricted reads: the platform minimum
/// plus the workspace, no network.
pub fn fs_helper_spec(cwd: &Path) -> SandboxSpec {
    SandboxSpec {
        readable: Some(vec![cwd.to_path_buf()]),
        minimal_readable: true,
        writable: Vec::new(),
        network: false,
    }
}

/// Where Codex's per-process `codex-linux-sandbox` alias lives; a restricted profile without
/// `:minimal` cannot exec it (the facts doc's "big gotcha").
pub fn sandbox_helper_alias() -> PathBuf {
    let home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/nonexistent/.codex"));
    home.join("tmp/arg0-linux/codex-arg0fake00/codex-linux-sandbox")
}

/// The helper alias's folder, created as Codex creates it at start (a `.lock` beside the
/// alias); `None` when there is no `CODEX_HOME` or it cannot be written.
fn ensure_helper_alias_folder() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")?;
    let alias = sandbox_helper_alias();
    let folder = alias.parent()?.to_path_buf();
    std::fs::create_dir_all(&folder).ok()?;
    let lock = folder.join(".lock");
    if !lock.exists() {
        std::fs::write(&lock, "").ok()?;
    }
    Some(folder)
}

/// Names the bundled bubblewrap of the fake, standing for the `codex-resources/bwrap` a Codex
/// package ships next to its executable (the harness sets it; unset: the fake has none).
pub const BUNDLED_BWRAP_VAR: &str = "FAKE_APP_SERVER_BUNDLED_BWRAP";

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    // Codex's PATH lookup skips a file nobody may execute (as an empty file bound over bwrap).
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The bubblewrap Codex would run, looked up as Codex 0.169.0 does: `/usr/bin/bwrap`, else
/// `bwrap` on PATH, when executable; else the bundled one ([`BUNDLED_BWRAP_VAR`]).
pub fn find_bwrap() -> Option<PathBuf> {
    system_bwrap().or_else(|| {
        std::env::var_os(BUNDLED_BWRAP_VAR)
            .map(PathBuf::from)
            .filter(|bundled| executable(bundled))
    })
}

/// The system bubblewrap: `/usr/bin/bwrap`, else `bwrap` on PATH, when executable.
pub fn system_bwrap() -> Option<PathBuf> {
    let preferred = PathBuf::from("/usr/bin/bwrap");
    if executable(&preferred) {
        return Some(preferred);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| executable(candidate))
    })
}

/// `args` without `--proc /proc`: what Codex runs when bubblewrap could not mount /proc.
pub fn without_proc(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        if arg == "--proc" && iter.peek().is_some_and(|next| *next == "/proc") {
            iter.next();
            continue;
        }
        if arg == "--" {
            out.push(arg.clone());
            out.extend(iter.cloned());
            break;
        }
        out.push(arg.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_off_unshares_net_and_always_user() {
        let args = sandbox_args(&SandboxSpec::full_read(false), Path::new("/"));
        assert!(args.contains(&"--unshare-user".to_string()));
        assert!(args.contains(&"--unshare-net".to_string()));
        let args = sandbox_args(&SandboxSpec::full_read(true), Path::new("/"));
        assert!(!args.contains(&"--unshare-net".to_string()));
        assert!(args.windows(3).any(|w| w == ["--ro-bind", "/", "/"]));
    }

    #[test]
    fn the_no_proc_retry_drops_only_the_proc_mount() {
        let args: Vec<String> = [
            "--dev", "/dev", "--proc", "/proc", "--", "sh", "--proc", "/proc",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            without_proc(&args),
            ["--dev", "/dev", "--", "sh", "--proc", "/proc"]
        );
    }

    #[test]
    fn restricted_reads_start_from_an_empty_root() {
        let spec = fs_helper_spec(Path::new("/tmp"));
        let args = sandbox_args(&spec, Path::new("/tmp"));
        assert!(args.windows(2).any(|w| w == ["--tmpfs", "/"]));
        assert!(args.windows(3).any(|w| w == ["--ro-bind", "/tmp", "/tmp"]));
    }
}
