//! Permission profiles: the named `permissions.NAME` tables the driver defines with `-c`, and
//! their rendering as the inline TOML that Codex accepts (a dotted `-c` key keeps quotes as part
//! of the key, so special paths such as `":root"` only work inside an inline table).

use serde::Serialize;
use std::path::{Path, PathBuf};

/// The profile a standard or ask run uses outside an external sandbox.
pub const WORKSPACE: &str = "paperclip-runner-workspace";
/// The profile every planning run uses.
pub const WORKSPACE_READ_ONLY: &str = "paperclip-runner-workspace-read-only";
/// The profile standard and ask runs use inside an external sandbox.
pub const EXTERNAL_SANDBOX: &str = "paperclip-runner-external-sandbox";

/// Access to one filesystem path, as Codex spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    Write,
    None,
}

impl Access {
    fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::None => "none",
        }
    }
}

/// One entry of a profile's `filesystem` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FsEntry {
    /// A special path (`:root`, `:minimal`) or an absolute path.
    Path { path: String, access: Access },
    /// `:workspace_roots`: sub-paths of every workspace root.
    WorkspaceRoots { subpath: String, access: Access },
}

/// A named permission profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    pub name: String,
    pub filesystem: Vec<FsEntry>,
    pub network_enabled: bool,
}

impl Profile {
    /// `{filesystem={…},network={enabled=…}}` as one inline TOML table.
    pub(crate) fn inline_toml(&self) -> String {
        let mut fs_parts = Vec::new();
        let mut roots = Vec::new();
        for entry in &self.filesystem {
            match entry {
                FsEntry::Path { path, access } => fs_parts.push(format!(
                    "{}={}",
                    toml_string(path),
                    toml_string(access.as_str())
                )),
                FsEntry::WorkspaceRoots { subpath, access } => roots.push(format!(
                    "{}={}",
                    toml_string(subpath),
                    toml_string(access.as_str())
                )),
            }
        }
        if !roots.is_empty() {
            // Workspace roots go after the plain paths, as one scoped table.
            fs_parts.push(format!(
                "{}={{{}}}",
                toml_string(":workspace_roots"),
                roots.join(",")
            ));
        }
        format!(
            "{{filesystem={{{}}},network={{enabled={}}}}}",
            fs_parts.join(","),
            self.network_enabled
        )
    }

    /// The `-c` value defining this profile: `permissions.NAME={…}`.
    pub(crate) fn config_override(&self) -> String {
        format!("permissions.{}={}", self.name, self.inline_toml())
    }

    /// Whether any entry grants write access.
    pub fn grants_write(&self) -> bool {
        self.filesystem.iter().any(|e| match e {
            FsEntry::Path { access, .. } | FsEntry::WorkspaceRoots { access, .. } => {
                *access == Access::Write
            }
        })
    }

    /// Whether any entry denies access (`none`).
    pub fn has_deny_entries(&self) -> bool {
        self.filesystem.iter().any(|e| match e {
            FsEntry::Path { access, path } => *access == Access::None && path != ":root",
            FsEntry::WorkspaceRoots { access, .. } => *access == Access::None,
        })
    }

    /// The access of a plain path entry, if the profile names it.
    pub fn access_of(&self, wanted: &str) -> Option<Access> {
        self.filesystem.iter().find_map(|e| match e {
            FsEntry::Path { path, access } if path == wanted => Some(*access),
            _ => None,
        })
    }
}

/// A TOML basic string, escaped by the `toml` crate (paths may hold quotes or backslashes).
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Names the real app-server's install folder when the program a driver starts is a stand-in
/// (the wire tap); set by the harness for drivers under the events contract.
pub const INSTALL_DIR_VAR: &str = "HARNESS_APP_SERVER_INSTALL_DIR";

/// Host paths the restricted profiles must name explicitly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostPaths {
    /// `HOME` of the app-server (denied).
    pub home: Option<PathBuf>,
    /// `CODEX_HOME` of the app-server (denied).
    pub codex_home: Option<PathBuf>,
    /// The folder of the app-server's own files, which its sandbox helper re-executes (read):
    /// without it, a profile whose root is `none` cannot run any command.
    pub install_dir: Option<PathBuf>,
}

impl HostPaths {
    /// From the app-server's complete environment and its program path.
    pub fn from_env_pairs(env: &[(String, String)], program: Option<&Path>) -> Self {
        let get = |name: &str| {
            env.iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| PathBuf::from(v))
        };
        let home = get("HOME");
        let codex_home = get("CODEX_HOME").or_else(|| home.as_ref().map(|h| h.join(".codex")));
        // Behind the wire tap the program is the tap's `codex` shim: the harness names the
        // real app-server's install folder in its environment.
        let install_dir = get(INSTALL_DIR_VAR).or_else(|| program.and_then(install_dir_of));
        Self {
            home,
            codex_home,
            install_dir,
        }
    }

    /// From this process's environment (what `harness launch` shows).
    pub fn from_process_env(program: Option<&Path>) -> Self {
        let env: Vec<(String, String)> = ["HOME", "CODEX_HOME"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        Self::from_env_pairs(&env, program)
    }
}

/// The install folder of a program: the platform folder above `bin/` (Codex ships its
/// bubblewrap next to `bin/`), else the program's own folder.
fn install_dir_of(program: &Path) -> Option<PathBuf> {
    let program = program
        .canonicalize()
        .unwrap_or_else(|_| program.to_path_buf());
    let dir = program.parent()?;
    if dir.file_name().is_some_and(|n| n == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

fn path_entry(path: &Path, access: Access) -> FsEntry {
    FsEntry::Path {
        path: path.to_string_lossy().into_owned(),
        access,
    }
}

/// Entries shared by the narrow profiles: nothing but the minimal system set, the app-server's
/// install folder, and the workspace (with `workspace`); HOME and CODEX_HOME stay denied.
fn narrow_entries(host: &HostPaths, workspace: Access) -> Vec<FsEntry> {
    let mut entries = vec![
        FsEntry::Path {
            path: ":root".into(),
            access: Access::None,
        },
        FsEntry::Path {
            path: ":minimal".into(),
            access: Access::Read,
        },
    ];
    if let Some(dir) = &host.install_dir {
        entries.push(path_entry(dir, Access::Read));
    }
    // Root `none` already denies HOME and CODEX_HOME. An explicit `none` is added for HOME only
    // when it does not hold CODEX_HOME: Codex 0.169 re-executes its sandbox helper from
    // `$CODEX_HOME/tmp/arg0-linux/…`, and an explicit deny over that path makes every sandboxed
    // command and thread/start fail (`bwrap: execvp …codex-linux-sandbox: Permission denied`).
    if let Some(home) = &host.home {
        let holds_codex_home = host
            .codex_home
            .as_ref()
            .is_some_and(|c| c.starts_with(home));
        let entry = path_entry(home, Access::None);
        let FsEntry::Path { path, .. } = &entry else {
            unreachable!()
        };
        // A key twice would make the inline table invalid TOML; the first rule for a path stands.
        let duplicate = entries
            .iter()
            .any(|e| matches!(e, FsEntry::Path { path: p, .. } if p == path));
        if !holds_codex_home && !duplicate {
            entries.push(entry);
        }
    }
    entries.push(FsEntry::WorkspaceRoots {
        subpath: ".".into(),
        access: workspace,
    });
    entries
}

/// The workspace-only default: root none, minimal read, workspace write, HOME/CODEX_HOME denied.
pub(crate) fn workspace(host: &HostPaths, network_enabled: bool) -> Profile {
    Profile {
        name: WORKSPACE.into(),
        filesystem: narrow_entries(host, Access::Write),
        network_enabled,
    }
}

/// Planning with the narrow rules: like the default but the workspace is only readable.
pub(crate) fn workspace_read_only_narrow(host: &HostPaths, network_enabled: bool) -> Profile {
    Profile {
        name: WORKSPACE_READ_ONLY.into(),
        filesystem: narrow_entries(host, Access::Read),
        network_enabled,
    }
}

/// Planning inside an external sandbox: full-disk read, no deny entries, no writes. Restricted
/// reads would make Codex load files through its bubblewrap helper, which cannot start there.
pub(crate) fn workspace_read_only_full_read(network_enabled: bool) -> Profile {
    Profile {
        name: WORKSPACE_READ_ONLY.into(),
        filesystem: vec![FsEntry::Path {
            path: ":root".into(),
            access: Access::Read,
        }],
        network_enabled,
    }
}

/// Standard and ask runs inside an external sandbox: the target itself is the sandbox.
pub(crate) fn external_sandbox(network_enabled: bool) -> Profile {
    Profile {
        name: EXTERNAL_SANDBOX.into(),
        filesystem: vec![FsEntry::Path {
            path: ":root".into(),
            access: Access::Write,
        }],
        network_enabled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_read_profile_renders_as_codex_accepts_it() {
        assert_eq!(
            workspace_read_only_full_read(true).config_override(),
            r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read"},network={enabled=true}}"#
        );
    }

    #[test]
    fn narrow_profile_escapes_paths_and_scopes_workspace_roots() {
        let host = HostPaths {
            home: Some("/home/a \"b\"".into()),
            codex_home: None,
            install_dir: Some("/opt/codex".into()),
        };
        let toml = workspace(&host, false).inline_toml();
        assert_eq!(
            toml,
            r#"{filesystem={":root"="none",":minimal"="read","/opt/codex"="read",'/home/a "b"'="none",":workspace_roots"={"."="write"}},network={enabled=false}}"#
        );
        // The rendering is valid TOML that parses back to the same rules.
        let parsed: toml::Table = toml::from_str(&format!("p={toml}")).unwrap();
        assert_eq!(
            parsed["p"]["filesystem"]["/home/a \"b\""].as_str(),
            Some("none")
        );
    }

    #[test]
    fn a_path_named_twice_is_listed_once_so_the_table_stays_valid_toml() {
        let host = HostPaths {
            home: Some("/h".into()),
            codex_home: Some("/elsewhere".into()),
            install_dir: Some("/h".into()),
        };
        let toml = workspace_read_only_narrow(&host, false).inline_toml();
        let parsed: toml::Table = toml::from_str(&format!("p={toml}")).expect(&toml);
        assert_eq!(parsed["p"]["filesystem"]["/h"].as_str(), Some("read"));
    }

    #[test]
    fn install_dir_is_the_platform_folder_above_bin() {
        assert_eq!(
            install_dir_of(Path::new("/nonexistent/vendor/x86/bin/codex")),
            Some(PathBuf::from("/nonexistent/vendor/x86"))
        );
        assert_eq!(
            install_dir_of(Path::new("/nonexistent/target/debug/harness")),
            Some(PathBuf::from("/nonexistent/target/debug"))
        );
    }
}
