//! Which workspaces a run may use (the runner contract's workspace rule): never the filesystem
//! root, never a folder that contains the host's `HOME`, never one that overlaps `CODEX_HOME`
//! (inside it, or holding it) — the model's commands may write the workspace, and those folders
//! hold the credentials and configuration the sandbox keeps from them. Checked before anything
//! is launched.

use super::profiles::HostPaths;
use std::path::{Component, Path, PathBuf};

/// Why a workspace is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UnsafeWorkspace {
    #[error("the workspace `{0}` is not an absolute path")]
    NotAbsolute(String),
    #[error("the workspace `{workspace}` names `{placeholder}`, which the app-server's environment does not set")]
    Unresolved {
        workspace: String,
        placeholder: &'static str,
    },
    #[error("the workspace is the filesystem root: every file of the host would be the model's to write")]
    Root,
    #[error("the workspace `{workspace}` contains the home folder `{home}`")]
    ContainsHome { workspace: PathBuf, home: PathBuf },
    #[error("the workspace `{workspace}` overlaps the Codex home `{codex_home}` (its credentials and configuration)")]
    OverlapsCodexHome {
        workspace: PathBuf,
        codex_home: PathBuf,
    },
}

/// `{home}` and `{codex_home}` in a task's workspace, replaced by the app-server's folders.
pub(crate) fn resolve(text: &str, host: &HostPaths) -> Result<PathBuf, UnsafeWorkspace> {
    let mut resolved = text.to_string();
    for (placeholder, value) in [
        ("{codex_home}", host.codex_home.as_ref()),
        ("{home}", host.home.as_ref()),
    ] {
        if !resolved.contains(placeholder) {
            continue;
        }
        let value = value.ok_or_else(|| UnsafeWorkspace::Unresolved {
            workspace: text.to_string(),
            placeholder,
        })?;
        resolved = resolved.replace(placeholder, &value.to_string_lossy());
    }
    let path = PathBuf::from(&resolved);
    if !path.is_absolute() {
        return Err(UnsafeWorkspace::NotAbsolute(resolved));
    }
    Ok(path)
}

/// `path` without `.` and `..` components (lexically), and resolved through links where it
/// exists, so `/w/../` and a link to `/` are seen as what they are.
fn normalised(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Refuse `workspace` when it is the root, contains one of `homes` (the app-server's `HOME`,
/// the driver's own), or overlaps the app-server's `CODEX_HOME`.
pub(crate) fn check(
    workspace: &Path,
    host: &HostPaths,
    homes: &[&Path],
) -> Result<(), UnsafeWorkspace> {
    if !workspace.is_absolute() {
        return Err(UnsafeWorkspace::NotAbsolute(
            workspace.to_string_lossy().into_owned(),
        ));
    }
    let ws = normalised(workspace);
    if ws.parent().is_none() {
        return Err(UnsafeWorkspace::Root);
    }
    for home in host
        .home
        .iter()
        .map(PathBuf::as_path)
        .chain(homes.iter().copied())
    {
        let home = normalised(home);
        if home.starts_with(&ws) {
            return Err(UnsafeWorkspace::ContainsHome {
                workspace: ws,
                home,
            });
        }
    }
    if let Some(codex_home) = &host.codex_home {
        let codex_home = normalised(codex_home);
        if codex_home.starts_with(&ws) || ws.starts_with(&codex_home) {
            return Err(UnsafeWorkspace::OverlapsCodexHome {
                workspace: ws,
                codex_home,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostPaths {
        HostPaths {
            home: Some("/cell/home".into()),
            codex_home: Some("/cell/home/.codex".into()),
            install_dir: None,
        }
    }

    #[test]
    fn the_root_a_home_holder_and_the_codex_home_are_refused() {
        let h = host();
        let none: &[&Path] = &[];
        assert_eq!(check(Path::new("/"), &h, none), Err(UnsafeWorkspace::Root));
        assert_eq!(
            check(Path::new("/cell/workspace/../.."), &h, none),
            Err(UnsafeWorkspace::Root)
        );
        assert!(matches!(
            check(Path::new("/cell"), &h, none),
            Err(UnsafeWorkspace::ContainsHome { .. })
        ));
        assert!(matches!(
            check(Path::new("/cell/home"), &h, none),
            Err(UnsafeWorkspace::ContainsHome { .. })
        ));
        assert!(matches!(
            check(Path::new("/cell/home/.codex/sessions"), &h, none),
            Err(UnsafeWorkspace::OverlapsCodexHome { .. })
        ));
        assert!(matches!(
            check(Path::new("/elsewhere"), &h, &[Path::new("/elsewhere/me")]),
            Err(UnsafeWorkspace::ContainsHome { .. })
        ));
        assert!(matches!(
            check(Path::new("relative"), &h, none),
            Err(UnsafeWorkspace::NotAbsolute(_))
        ));
        assert_eq!(check(Path::new("/cell/workspace"), &h, none), Ok(()));
        assert_eq!(check(Path::new("/cell/home-not"), &h, none), Ok(()));
    }

    #[test]
    fn placeholders_name_the_app_server_folders() {
        let h = host();
        assert_eq!(resolve("/", &h), Ok(PathBuf::from("/")));
        assert_eq!(resolve("{home}/..", &h), Ok(PathBuf::from("/cell/home/..")));
        assert_eq!(
            resolve("{codex_home}/w", &h),
            Ok(PathBuf::from("/cell/home/.codex/w"))
        );
        assert!(matches!(
            resolve("{home}", &HostPaths::default()),
            Err(UnsafeWorkspace::Unresolved { .. })
        ));
        assert!(matches!(
            resolve("w", &h),
            Err(UnsafeWorkspace::NotAbsolute(_))
        ));
    }
}
