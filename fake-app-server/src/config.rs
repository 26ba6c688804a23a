//! `-c key=value` overrides, parsed like Codex parses them, and the permission profiles they
//! define. Start-up errors carry the real server's texts (measured with Codex 0.169.0).

use graders::codex_overrides::{self, insert_dotted, OverrideError};
use std::collections::BTreeMap;

/// A start-up failure; printed as `Error: {0}` with exit code 1, like Codex.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// What a profile lets sandboxed commands read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reads {
    /// `":root"="read"` (or write): the whole disk is readable.
    Full,
    /// Only the listed paths (plus what the sandbox itself needs).
    Restricted(Vec<String>),
}

/// A permission profile, built-in or from `[permissions.NAME]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub id: String,
    pub reads: Reads,
    /// Writable paths; `:workspace_roots` stands for the thread's cwd.
    pub writes: Vec<String>,
    pub network: bool,
    /// `:danger-full-access`: no sandbox at all.
    pub unsandboxed: bool,
    /// `":root"="write"`.
    pub root_writable: bool,
    /// The filesystem table has entries besides `:root`. Codex 0.169 (measured) runs the
    /// commands of a `":root"="write"` profile with no sandbox at all unless it is narrowed.
    pub narrowed: bool,
}

pub const WORKSPACE_ROOTS: &str = ":workspace_roots";

impl Profile {
    fn builtin(id: &str) -> Option<Profile> {
        let base = Profile {
            id: id.to_string(),
            reads: Reads::Full,
            writes: Vec::new(),
            network: false,
            unsandboxed: false,
            root_writable: false,
            narrowed: false,
        };
        match id {
            ":read-only" => Some(base),
            ":workspace" => Some(Profile {
                writes: vec![WORKSPACE_ROOTS.to_string()],
                ..base
            }),
            ":danger-full-access" => Some(Profile {
                unsandboxed: true,
                network: true,
                ..base
            }),
            _ => None,
        }
    }
}

pub const BUILTIN_PROFILES: &[&str] = &[":read-only", ":workspace", ":danger-full-access"];

/// The configuration assembled from every `-c`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub default_permissions: Option<String>,
    pub profiles: BTreeMap<String, Profile>,
    /// `model` / `model_provider` as given (echoed in thread results).
    pub model: Option<String>,
    pub model_provider: Option<String>,
    /// Every `-c` override as one table: Codex's `sessionFlags` layer (`config/read`).
    pub session_flags: toml::Table,
}

impl Config {
    /// Parse `-c` overrides in order (later ones win, like Codex).
    pub fn from_overrides(overrides: &[String]) -> Result<Config, ConfigError> {
        let mut root = toml::Table::new();
        for raw in overrides {
            let (key, value) = parse_override(raw)?;
            insert_dotted(&mut root, &key, value);
        }
        let mut config = Config {
            model: root
                .get("model")
                .and_then(|v| v.as_str())
                .map(str::to_string),
            model_provider: root
                .get("model_provider")
                .and_then(|v| v.as_str())
                .map(str::to_string),
            session_flags: root.clone(),
            ..Config::default()
        };
        if let Some(table) = root.get("permissions") {
            let table = table.as_table().ok_or_else(|| {
                ConfigError(format!(
                    "invalid type: {}, expected a map\nin `permissions`\n",
                    describe(table)
                ))
            })?;
            for (name, value) in table {
                config
                    .profiles
                    .insert(name.clone(), parse_profile(name, value)?);
            }
        }
        config.default_permissions = match root.get("default_permissions") {
            None => None,
            Some(toml::Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(ConfigError(format!(
                    "invalid type: {}, expected a string\nin `default_permissions`\n",
                    describe(other)
                )))
            }
        };
        match (&config.default_permissions, config.profiles.is_empty()) {
            (None, false) => return Err(ConfigError(
                "config defines `[permissions]` profiles but does not set `default_permissions`"
                    .into(),
            )),
            (Some(name), true) if Profile::builtin(name).is_none() => {
                return Err(ConfigError(
                    "default_permissions requires a `[permissions]` table".into(),
                ))
            }
            _ => {}
        }
        Ok(config)
    }

    /// Resolve a profile id (`None` = `default_permissions`, else `:read-only`). The error text
    /// is the suffix Codex puts after its context (`failed to load configuration: …`).
    pub fn profile(&self, id: Option<&str>) -> Result<Profile, String> {
        let id = id
            .or(self.default_permissions.as_deref())
            .unwrap_or(":read-only");
        if let Some(profile) = self.profiles.get(id) {
            return Ok(profile.clone());
        }
        Profile::builtin(id)
            .ok_or_else(|| format!("default_permissions refers to undefined profile `{id}`"))
    }

    /// Whether the configured model provider needs an OpenAI login: only the built-in `openai`
    /// provider does, unless a custom provider sets `requires_openai_auth = true` (Codex 0.169
    /// answers `account/read` so; measured).
    pub fn requires_openai_auth(&self) -> bool {
        let provider = self.model_provider.as_deref().unwrap_or("openai");
        if provider == "openai" {
            return true;
        }
        self.session_flags
            .get("model_providers")
            .and_then(|p| p.get(provider))
            .and_then(|p| p.get("requires_openai_auth"))
            .and_then(toml::Value::as_bool)
            .unwrap_or(false)
    }

    /// Ids for `permissionProfile/list`: built-ins first, then the configured ones by name.
    pub fn profile_ids(&self) -> Vec<String> {
        BUILTIN_PROFILES
            .iter()
            .map(|s| s.to_string())
            .chain(
                self.profiles
                    .keys()
                    .filter(|k| !k.starts_with(':'))
                    .cloned(),
            )
            .collect()
    }
}

/// `key=value`, by Codex's rules (`graders::codex_overrides`), with Codex's error texts.
fn parse_override(raw: &str) -> Result<(Vec<String>, toml::Value), ConfigError> {
    codex_overrides::parse_override(raw).map_err(|e| {
        ConfigError(match e {
            OverrideError::MissingEquals => {
                format!("error parsing -c overrides: Invalid override (missing '='): {raw}")
            }
            OverrideError::EmptyKey => {
                format!("error parsing -c overrides: Empty key in override: {raw}")
            }
        })
    })
}

fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer `{i}`"),
        toml::Value::Float(f) => format!("floating point `{f}`"),
        toml::Value::Boolean(b) => format!("boolean `{b}`"),
        toml::Value::Datetime(d) => format!("datetime `{d}`"),
        toml::Value::Array(_) => "sequence".to_string(),
        toml::Value::Table(_) => "map".to_string(),
    }
}

const UNTAGGED_FILESYSTEM: &str =
    "data did not match any variant of untagged enum FilesystemPermissionToml\nin `permissions`\n";

fn access_of(value: &toml::Value) -> Option<&str> {
    value
        .as_str()
        .filter(|s| matches!(*s, "read" | "write" | "none"))
}

fn parse_profile(name: &str, value: &toml::Value) -> Result<Profile, ConfigError> {
    let table = value.as_table().ok_or_else(|| {
        ConfigError(format!(
            "invalid type: {}, expected a map\nin `permissions`\n",
            describe(value)
        ))
    })?;
    let mut profile = Profile {
        id: name.to_string(),
        reads: Reads::Restricted(Vec::new()),
        writes: Vec::new(),
        network: false,
        unsandboxed: false,
        root_writable: false,
        narrowed: false,
    };
    let mut readable = Vec::new();
    let mut root_access = "none";
    if let Some(filesystem) = table.get("filesystem") {
        let filesystem = filesystem
            .as_table()
            .ok_or_else(|| ConfigError(UNTAGGED_FILESYSTEM.into()))?;
        // serde checks every value's shape (the untagged enum) before any path is validated.
        let well_formed = |access: &toml::Value| {
            access_of(access).is_some()
                || access
                    .as_table()
                    .is_some_and(|scoped| scoped.values().all(|v| access_of(v).is_some()))
        };
        if !filesystem.values().all(well_formed) {
            return Err(ConfigError(UNTAGGED_FILESYSTEM.into()));
        }
        profile.narrowed = filesystem.keys().any(|path| path != ":root");
        for (path, access) in filesystem {
            if !(path.starts_with('/') || path.starts_with("~/") || path.starts_with(':')) {
                return Err(ConfigError(format!(
                    "filesystem path `{path}` must be absolute, use `~/...`, or start with `:`"
                )));
            }
            if let Some(access) = access_of(access) {
                if path == ":root" {
                    root_access = access;
                    profile.root_writable = access == "write";
                }
                match access {
                    "read" => readable.push(path.clone()),
                    "write" => {
                        readable.push(path.clone());
                        profile.writes.push(path.clone());
                    }
                    _ => {}
                }
                continue;
            }
            // A scoped table: subpath → access (e.g. `":workspace_roots"={"."="read"}`).
            let scoped = access
                .as_table()
                .ok_or_else(|| ConfigError(UNTAGGED_FILESYSTEM.into()))?;
            for (subpath, access) in scoped {
                let access =
                    access_of(access).ok_or_else(|| ConfigError(UNTAGGED_FILESYSTEM.into()))?;
                let joined = if subpath == "." {
                    path.clone()
                } else {
                    format!("{path}/{subpath}")
                };
                match access {
                    "read" => readable.push(joined),
                    "write" => {
                        readable.push(joined.clone());
                        profile.writes.push(joined);
                    }
                    _ => {}
                }
            }
        }
    }
    profile.reads = if matches!(root_access, "read" | "write") {
        Reads::Full
    } else {
        Reads::Restricted(readable)
    };
    if let Some(network) = table.get("network") {
        let network = network.as_table().ok_or_else(|| {
            ConfigError(format!(
                "invalid type: {}, expected a map\nin `permissions`\n",
                describe(network)
            ))
        })?;
        if let Some(enabled) = network.get("enabled") {
            profile.network = enabled.as_bool().ok_or_else(|| {
                ConfigError(format!(
                    "invalid type: {}, expected a boolean\nin `permissions`\n",
                    describe(enabled)
                ))
            })?;
        }
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, ConfigError> {
        Config::from_overrides(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn inline_tables_define_profiles() {
        let config = parse(&[
            r#"default_permissions="a""#,
            r#"permissions.a={filesystem={":root"="none",":workspace_roots"={"."="read"}},network={enabled=false}}"#,
            r#"permissions.b={filesystem={":root"="read"},network={enabled=true}}"#,
        ])
        .unwrap();
        let a = config.profile(None).unwrap();
        assert_eq!(a.reads, Reads::Restricted(vec![":workspace_roots".into()]));
        assert!(!a.network);
        let b = config.profile(Some("b")).unwrap();
        assert_eq!(b.reads, Reads::Full);
        assert!(b.network);
        assert_eq!(
            config.profile_ids(),
            vec![":read-only", ":workspace", ":danger-full-access", "a", "b"]
        );
    }

    #[test]
    fn real_startup_errors() {
        let cases: &[(&[&str], &str)] = &[
            (
                &[
                    r#"default_permissions="p""#,
                    r#"permissions.p.filesystem.":root"="none""#,
                ],
                "filesystem path `\":root\"` must be absolute, use `~/...`, or start with `:`",
            ),
            (
                &[
                    r#"default_permissions="p""#,
                    r#"permissions.p.filesystem.":workspace_roots"."."="read""#,
                ],
                UNTAGGED_FILESYSTEM,
            ),
            (
                &[
                    r#"default_permissions="p""#,
                    r#"permissions.p.filesystem={":root"="no-access"}"#,
                ],
                UNTAGGED_FILESYSTEM,
            ),
            (
                &[r#"permissions.p={filesystem={":root"="read"}}"#],
                "config defines `[permissions]` profiles but does not set `default_permissions`",
            ),
            (
                &[r#"default_permissions="nope""#],
                "default_permissions requires a `[permissions]` table",
            ),
            (
                &["garbage"],
                "error parsing -c overrides: Invalid override (missing '='): garbage",
            ),
            (
                &[
                    r#"default_permissions="p""#,
                    r#"permissions.p={filesystem={":root"="read"},network={enabled="yes"}}"#,
                ],
                "invalid type: string \"yes\", expected a boolean\nin `permissions`\n",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(parse(args).unwrap_err().0, *expected, "{args:?}");
        }
    }

    #[test]
    fn bare_values_fall_back_to_strings_and_builtins_need_no_table() {
        let config = parse(&["default_permissions=:workspace"]).unwrap();
        assert_eq!(config.profile(None).unwrap().writes, vec![WORKSPACE_ROOTS]);
        assert!(config.profile(Some("x")).unwrap_err().contains("`x`"));
    }
}
