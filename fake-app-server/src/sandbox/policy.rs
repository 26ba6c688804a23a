//! What a thread (or one command) is allowed to do: a permission profile or a legacy sandbox
//! policy, and how each projects onto the protocol's `sandbox` / `activePermissionProfile` fields.

use crate::config::{Profile, Reads, WORKSPACE_ROOTS};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A legacy `sandboxPolicy` (turn/start, command/exec) or `sandbox` mode (thread/start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LegacyPolicy {
    ReadOnly {
        network: bool,
    },
    WorkspaceWrite {
        writable_roots: Vec<PathBuf>,
        network: bool,
    },
    ExternalSandbox {
        network_enabled: bool,
    },
    DangerFullAccess,
}

impl LegacyPolicy {
    /// Parse a `sandboxPolicy` object. Errors are the real server's texts.
    pub fn from_policy_json(value: &Value) -> Result<Self, String> {
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        let bool_field = |name: &str| value.get(name).and_then(Value::as_bool).unwrap_or(false);
        match kind {
            "readOnly" => {
                if value.get("access").is_some_and(|v| !v.is_null()) {
                    return Err("Invalid request: readOnly.access is no longer supported; use permissionProfile for restricted reads".into());
                }
                Ok(Self::ReadOnly {
                    network: bool_field("networkAccess"),
                })
            }
            "workspaceWrite" => Ok(Self::WorkspaceWrite {
                writable_roots: value
                    .get("writableRoots")
                    .and_then(Value::as_array)
                    .map(|roots| {
                        roots
                            .iter()
                            .filter_map(Value::as_str)
                            .map(PathBuf::from)
                            .collect()
                    })
                    .unwrap_or_default(),
                network: bool_field("networkAccess"),
            }),
            "externalSandbox" => Ok(Self::ExternalSandbox {
                network_enabled: value.get("networkAccess").and_then(Value::as_str) == Some("enabled"),
            }),
            "dangerFullAccess" => Ok(Self::DangerFullAccess),
            other => Err(format!(
                "Invalid request: unknown variant `{other}`, expected one of `dangerFullAccess`, `readOnly`, `externalSandbox`, `workspaceWrite`"
            )),
        }
    }

    /// Parse a thread/start `sandbox` mode.
    pub fn from_mode(mode: &str) -> Result<Self, String> {
        match mode {
            "read-only" => Ok(Self::ReadOnly { network: false }),
            "workspace-write" => Ok(Self::WorkspaceWrite {
                writable_roots: Vec::new(),
                network: false,
            }),
            "danger-full-access" => Ok(Self::DangerFullAccess),
            other => Err(format!(
                "Invalid request: unknown variant `{other}`, expected one of `read-only`, `workspace-write`, `danger-full-access`"
            )),
        }
    }
}

/// The permissions in force for a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permissions {
    Profile(Profile),
    Legacy(LegacyPolicy),
}

/// How one command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecPolicy {
    /// No sandbox (externalSandbox, dangerFullAccess, or an approved escalation).
    Direct,
    /// Under bubblewrap.
    Sandboxed(SandboxSpec),
}

/// A resolved bubblewrap sandbox: absolute paths only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// `None` = the whole disk is readable.
    pub readable: Option<Vec<PathBuf>>,
    /// Whether the platform minimum (`/bin /etc /lib /lib64 /sbin /usr`) is readable; Codex's
    /// inner sandbox helper cannot even start without it.
    pub minimal_readable: bool,
    pub writable: Vec<PathBuf>,
    pub network: bool,
}

impl SandboxSpec {
    pub fn full_read(network: bool) -> Self {
        Self {
            readable: None,
            minimal_readable: true,
            writable: Vec::new(),
            network,
        }
    }
}

fn resolve_special(path: &str, cwd: &Path) -> Option<PathBuf> {
    if path == WORKSPACE_ROOTS {
        return Some(cwd.to_path_buf());
    }
    if let Some(sub) = path.strip_prefix(&format!("{WORKSPACE_ROOTS}/")) {
        return Some(cwd.join(sub));
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest));
    }
    if path.starts_with('/') {
        return Some(PathBuf::from(path));
    }
    None
}

impl Permissions {
    pub fn exec_policy(&self, cwd: &Path) -> ExecPolicy {
        match self {
            Permissions::Profile(profile) => {
                if profile.unsandboxed || (profile.root_writable && !profile.narrowed) {
                    return ExecPolicy::Direct;
                }
                if profile.root_writable {
                    let mut spec = SandboxSpec::full_read(profile.network);
                    spec.writable.push(PathBuf::from("/"));
                    return ExecPolicy::Sandboxed(spec);
                }
                let writable = profile
                    .writes
                    .iter()
                    .filter_map(|p| resolve_special(p, cwd))
                    .collect();
                let (readable, minimal_readable) = match &profile.reads {
                    Reads::Full => (None, true),
                    Reads::Restricted(paths) => (
                        Some(
                            paths
                                .iter()
                                .filter_map(|p| resolve_special(p, cwd))
                                .collect(),
                        ),
                        paths.iter().any(|p| p == ":minimal"),
                    ),
                };
                ExecPolicy::Sandboxed(SandboxSpec {
                    readable,
                    minimal_readable,
                    writable,
                    network: profile.network,
                })
            }
            Permissions::Legacy(LegacyPolicy::ReadOnly { network }) => {
                ExecPolicy::Sandboxed(SandboxSpec::full_read(*network))
            }
            Permissions::Legacy(LegacyPolicy::WorkspaceWrite {
                writable_roots,
                network,
            }) => {
                let mut spec = SandboxSpec::full_read(*network);
                spec.writable.push(cwd.to_path_buf());
                spec.writable.extend(writable_roots.iter().cloned());
                // Codex's `workspace-write` also writes `/tmp` and `$TMPDIR` (its projection
                // says so: `excludeSlashTmp` and `excludeTmpdirEnvVar` are false; observed with
                // 0.169, a command appends to a file below `/tmp` outside the workspace).
                spec.writable.push(PathBuf::from("/tmp"));
                if let Some(tmpdir) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
                    spec.writable.push(PathBuf::from(tmpdir));
                }
                ExecPolicy::Sandboxed(spec)
            }
            Permissions::Legacy(LegacyPolicy::ExternalSandbox { .. })
            | Permissions::Legacy(LegacyPolicy::DangerFullAccess) => ExecPolicy::Direct,
        }
    }

    /// Whether thread/start loads AGENTS.md through the sandboxed fs helper (restricted reads).
    pub fn needs_fs_helper(&self) -> bool {
        matches!(self, Permissions::Profile(p) if !p.unsandboxed && matches!(p.reads, Reads::Restricted(_)))
    }

    /// The legacy `sandbox` projection of the thread/start result.
    pub fn projection(&self) -> Value {
        match self {
            Permissions::Profile(profile) => profile_projection(profile),
            Permissions::Legacy(LegacyPolicy::ReadOnly { network }) => {
                json!({"type": "readOnly", "networkAccess": network})
            }
            Permissions::Legacy(LegacyPolicy::WorkspaceWrite {
                writable_roots,
                network,
            }) => json!({
                "type": "workspaceWrite", "writableRoots": writable_roots, "networkAccess": network,
                "excludeTmpdirEnvVar": false, "excludeSlashTmp": false
            }),
            Permissions::Legacy(LegacyPolicy::ExternalSandbox { network_enabled }) => json!({
                "type": "externalSandbox",
                "networkAccess": if *network_enabled { "enabled" } else { "restricted" }
            }),
            Permissions::Legacy(LegacyPolicy::DangerFullAccess) => {
                json!({"type": "dangerFullAccess"})
            }
        }
    }

    pub fn active_profile(&self) -> Value {
        match self {
            Permissions::Profile(profile) => json!({"id": profile.id, "extends": null}),
            Permissions::Legacy(_) => Value::Null,
        }
    }

    /// `sandbox_mode` as Codex names it (for `x-codex-turn-metadata`-like reporting).
    pub fn is_sandboxed(&self, cwd: &Path) -> bool {
        matches!(self.exec_policy(cwd), ExecPolicy::Sandboxed(_))
    }
}

/// How Codex 0.169 projects a permission profile onto the legacy `sandbox` field, as measured
/// with the pinned binary (thread/start with each shape of profile):
/// - `:danger-full-access`, and `":root"="write"` alone with network on: `dangerFullAccess`;
///   `":root"="write"` alone with network off: `externalSandbox` (`restricted`);
/// - `":root"="write"` with other entries: `workspaceWrite` of `/`, no exclusions;
/// - no writable path: `readOnly` (restricted and full reads look the same);
/// - writable paths: `workspaceWrite` whose `writableRoots` are the absolute writable paths
///   (the workspace roots are implied). The built-in `:workspace` excludes nothing; a custom
///   profile that writes the workspace excludes both `/tmp` and `$TMPDIR`; one that does not
///   write the workspace excludes `/tmp` / `$TMPDIR` unless it lists them.
fn profile_projection(profile: &Profile) -> Value {
    let network = profile.network;
    if profile.unsandboxed || (profile.root_writable && !profile.narrowed && network) {
        return json!({"type": "dangerFullAccess"});
    }
    if profile.root_writable && !profile.narrowed {
        return json!({"type": "externalSandbox", "networkAccess": "restricted"});
    }
    let workspace_write = |roots: Vec<String>, exclude_tmpdir: bool, exclude_slash_tmp: bool| {
        json!({
            "type": "workspaceWrite", "writableRoots": roots, "networkAccess": network,
            "excludeTmpdirEnvVar": exclude_tmpdir, "excludeSlashTmp": exclude_slash_tmp
        })
    };
    if profile.root_writable {
        return workspace_write(vec!["/".into()], false, false);
    }
    if profile.writes.is_empty() {
        return json!({"type": "readOnly", "networkAccess": network});
    }
    if profile.id == ":workspace" {
        return workspace_write(Vec::new(), false, false);
    }
    let roots: Vec<String> = profile
        .writes
        .iter()
        .filter(|path| !path.starts_with(WORKSPACE_ROOTS))
        .filter_map(|path| resolve_special(path, Path::new("/")).map(|p| p.display().to_string()))
        .collect();
    if profile.writes.iter().any(|path| path == WORKSPACE_ROOTS) {
        return workspace_write(roots, true, true);
    }
    let tmpdir = std::env::var("TMPDIR").ok().filter(|t| !t.is_empty());
    let lists = |wanted: Option<&str>| wanted.is_some_and(|w| roots.iter().any(|r| r == w));
    let exclude_tmpdir = !lists(tmpdir.as_deref());
    let exclude_slash_tmp = !lists(Some("/tmp"));
    workspace_write(roots, exclude_tmpdir, exclude_slash_tmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn projection_of(filesystem: &str, network: bool) -> Value {
        let args = vec![
            r#"default_permissions="p""#.to_string(),
            format!("permissions.p={{filesystem={{{filesystem}}},network={{enabled={network}}}}}"),
        ];
        let config = Config::from_overrides(&args).unwrap();
        Permissions::Profile(config.profile(None).unwrap()).projection()
    }

    /// Each expectation is what `codex app-server` 0.169.0 answered to thread/start with that
    /// profile.
    #[test]
    fn profiles_project_like_codex_0_169() {
        let narrow = r#"":root"="none",":minimal"="read",":workspace_roots"={"."="write"}"#;
        assert_eq!(
            projection_of(narrow, false),
            json!({"type": "workspaceWrite", "writableRoots": [], "networkAccess": false,
                "excludeTmpdirEnvVar": true, "excludeSlashTmp": true})
        );
        assert_eq!(
            projection_of(&format!(r#"{narrow},"/var/tmp"="write""#), true),
            json!({"type": "workspaceWrite", "writableRoots": ["/var/tmp"], "networkAccess": true,
                "excludeTmpdirEnvVar": true, "excludeSlashTmp": true})
        );
        assert_eq!(
            projection_of(r#"":root"="read","/tmp"="write""#, false),
            json!({"type": "workspaceWrite", "writableRoots": ["/tmp"], "networkAccess": false,
                "excludeTmpdirEnvVar": true, "excludeSlashTmp": false})
        );
        let read_only = r#"":root"="none",":minimal"="read",":workspace_roots"={"."="read"}"#;
        assert_eq!(
            projection_of(read_only, true),
            json!({"type": "readOnly", "networkAccess": true})
        );
        assert_eq!(
            projection_of(r#"":root"="write""#, false),
            json!({"type": "externalSandbox", "networkAccess": "restricted"})
        );
        assert_eq!(
            projection_of(r#"":root"="write""#, true),
            json!({"type": "dangerFullAccess"})
        );
        assert_eq!(
            projection_of(r#"":root"="write","/etc/ssl"="none""#, false),
            json!({"type": "workspaceWrite", "writableRoots": ["/"], "networkAccess": false,
                "excludeTmpdirEnvVar": false, "excludeSlashTmp": false})
        );
        let builtin = Config::from_overrides(&[]).unwrap();
        assert_eq!(
            Permissions::Profile(builtin.profile(Some(":workspace")).unwrap()).projection(),
            json!({"type": "workspaceWrite", "writableRoots": [], "networkAccess": false,
                "excludeTmpdirEnvVar": false, "excludeSlashTmp": false})
        );
    }

    #[test]
    fn a_root_writable_profile_runs_commands_unsandboxed_unless_narrowed() {
        let policy = |filesystem: &str| {
            let args = vec![
                r#"default_permissions="p""#.to_string(),
                format!("permissions.p={{filesystem={{{filesystem}}},network={{enabled=false}}}}"),
            ];
            let config = Config::from_overrides(&args).unwrap();
            Permissions::Profile(config.profile(None).unwrap()).exec_policy(Path::new("/w"))
        };
        assert_eq!(policy(r#"":root"="write""#), ExecPolicy::Direct);
        let ExecPolicy::Sandboxed(spec) = policy(r#"":root"="write","/etc/ssl"="none""#) else {
            panic!("a narrowed root-writable profile is sandboxed")
        };
        assert_eq!(spec.writable, vec![PathBuf::from("/")]);
        assert!(!spec.network);
    }
}
