//! What a launch argv configures, read the way Codex reads its `-c` overrides — never by
//! searching the argv text: a profile's filesystem table holds paths (a cell folder named
//! `external-sandbox-launch.…`, a profile named `…-external-sandbox`), and a path is not a
//! sandbox mode.
//!
//! Codex's rules, mirrored here: an override is `key=value`, split at the first `=`; the key is
//! split on `.` and quotes stay part of each part; the value is parsed as a TOML value, and a
//! value that does not parse is taken as a bare string with surrounding quotes trimmed (Codex's
//! fallback); overrides apply in argv order, a later one replacing what an earlier one set at
//! its key. Accepted spellings: `-c k=v`, `-ck=v`, `--config k=v`, `--config=k=v`; and Codex's
//! feature flags `--enable NAME` / `--disable NAME` (or `=NAME`), which its help calls equivalent
//! to `-c features.NAME=true` / `=false`, applied after every `-c` and each `--enable` before
//! each `--disable` as the fake plays them (fake-app-server's cli; measured: a feature given both
//! ends disabled). No judgement below reads `features`, so a flag never widens or narrows the
//! sandbox here, exactly as its `-c features.NAME` spelling does not. Anything
//! else in the argv is an [`ArgvError`]: the grader cannot tell what it does to the sandbox.
//!
//! The TOML itself is parsed by the `toml` crate; only the override splitting and merging is
//! written here, because it is Codex's own convention and no crate implements it.

use crate::codex_overrides::{insert_dotted, parse_override, OverrideError};
use std::fmt;

/// Built-in permission profiles that allow writes (or run with no sandbox at all).
const WRITABLE_BUILTINS: &[&str] = &[":workspace", ":danger-full-access"];
/// The only built-in profile without write access.
const READ_ONLY_BUILTIN: &str = ":read-only";
/// Filesystem access values Codex accepts in a profile.
const ACCESS_READ: &str = "read";
const ACCESS_WRITE: &str = "write";
const ACCESS_NONE: &str = "none";
/// Legacy `sandbox_mode` values.
const SANDBOX_MODE_READ_ONLY: &str = "read-only";
const WRITABLE_SANDBOX_MODES: &[&str] = &["workspace-write", "danger-full-access"];

/// An argv element the grader cannot read as a configuration override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgvError {
    /// 0-based position in `run.started.launch.argv`.
    pub index: usize,
    pub arg: String,
    pub problem: String,
}

impl fmt::Display for ArgvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "argv[{}] `{}`: {}", self.index, self.arg, self.problem)
    }
}

/// What a profile (or a sandbox setting) allows, as far as the argv shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// No write access; the text says why.
    ReadOnly(String),
    /// Write access or a wider sandbox than the launch asked for; the text says which.
    Widens(String),
    /// The argv does not show what the profile allows; the text says what is missing.
    Unverifiable(String),
}

/// The rules of one `permissions.NAME` table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProfileRules {
    /// Paths with `write` access (`:workspace_roots` entries as `:workspace_roots/SUBPATH`).
    pub writable: Vec<String>,
    /// `network.enabled`, when the profile sets it.
    pub network_enabled: Option<bool>,
}

/// The configuration a launch argv sets.
#[derive(Debug, Clone, Default)]
pub(crate) struct LaunchConfig {
    root: toml::Table,
    /// Every override as (key parts, the argv element that set it), in argv order.
    overrides: Vec<(Vec<String>, String)>,
}

impl LaunchConfig {
    pub(super) fn parse(argv: &[String]) -> Result<Self, ArgvError> {
        let mut config = LaunchConfig::default();
        // `--enable` / `--disable` as (on, name, the argv element that named the feature),
        // applied once the `-c` overrides are.
        let mut features: Vec<(bool, String, String)> = Vec::new();
        let mut index = 0;
        while index < argv.len() {
            let arg = &argv[index];
            let at = index;
            let error = |problem: &str| ArgvError {
                index: at,
                arg: arg.clone(),
                problem: problem.to_string(),
            };
            let raw = if arg == "-c" || arg == "--config" {
                index += 1;
                argv.get(index)
                    .ok_or_else(|| {
                        error("the option is the last argument; its `key=value` is missing")
                    })?
                    .as_str()
            } else if let Some(rest) = arg.strip_prefix("--config=") {
                rest
            } else if let Some(rest) = arg.strip_prefix("-c").filter(|_| !arg.starts_with("--")) {
                rest
            } else if index == 0 && arg == "app-server" {
                index += 1;
                continue;
            } else if let Some((on, name)) = feature_flag(arg) {
                let name = match name {
                    Some(name) => name.to_string(),
                    None => {
                        index += 1;
                        argv.get(index)
                            .ok_or_else(|| {
                                error(
                                    "the option is the last argument; its feature name is missing",
                                )
                            })?
                            .clone()
                    }
                };
                if name.is_empty() || name.contains('.') {
                    return Err(error("not a feature name"));
                }
                features.push((on, name, arg.clone()));
                index += 1;
                continue;
            } else {
                return Err(error(
                    "not a `-c key=value` override, so its effect on the sandbox is unknown",
                ));
            };
            let (key, value) = split_override(raw).map_err(|problem| ArgvError {
                index,
                arg: raw.to_string(),
                problem,
            })?;
            insert_dotted(&mut config.root, &key, value);
            config.overrides.push((key, raw.to_string()));
            index += 1;
        }
        // Stable: every `--enable` keeps its argv order, then every `--disable` its own.
        features.sort_by_key(|(on, _, _)| !on);
        for (on, name, raw) in features {
            let key = vec!["features".to_string(), name];
            insert_dotted(&mut config.root, &key, toml::Value::Boolean(on));
            config.overrides.push((key, raw));
        }
        Ok(config)
    }

    /// The argv element that last set `path` or something inside or above it (for evidence).
    pub(super) fn source_of(&self, path: &[&str]) -> Option<&str> {
        self.overrides
            .iter()
            .rev()
            .find(|(key, _)| key.iter().zip(path).all(|(k, p)| k == p))
            .map(|(_, raw)| raw.as_str())
    }

    /// A top-level string setting (`default_permissions`, `sandbox_mode`).
    pub(super) fn string_setting(&self, key: &str) -> Result<Option<&str>, String> {
        match self.root.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("`{key}` is {}, not a string", describe(other))),
        }
    }

    /// Whether a thread or turn that sent `explicit` selects no permission profile at all (none
    /// sent, no `default_permissions`): the legacy sandbox then applies.
    pub(super) fn selects_no_profile(&self, explicit: Option<&str>) -> bool {
        explicit.is_none() && !self.root.contains_key("default_permissions")
    }

    /// The profile a thread or turn runs under: `explicit` (the `permissions` it sent), else
    /// `default_permissions`.
    pub(super) fn selected_profile(&self, explicit: Option<&str>) -> Result<String, String> {
        if let Some(name) = explicit {
            return Ok(name.to_string());
        }
        match self.string_setting("default_permissions")? {
            Some(name) => Ok(name.to_string()),
            None => Err(
                "no profile is sent and the argv sets no `default_permissions`, so the profile in force is not shown".into(),
            ),
        }
    }

    /// Settings outside the permission profiles that could widen every thread's sandbox.
    pub(super) fn judge_sandbox_settings(&self) -> Judgement {
        if let Some(profile) = self.root.get("profile") {
            return Judgement::Unverifiable(format!(
                "the argv selects the config profile {}; the grader does not resolve config profiles, so the sandbox they set is not shown",
                show_value(profile)
            ));
        }
        match self.string_setting("sandbox_mode") {
            Err(e) => Judgement::Unverifiable(e),
            Ok(None) => Judgement::ReadOnly("no `sandbox_mode` is set".into()),
            Ok(Some(SANDBOX_MODE_READ_ONLY)) => {
                Judgement::ReadOnly(format!("`sandbox_mode` is `{SANDBOX_MODE_READ_ONLY}`"))
            }
            Ok(Some(mode)) if WRITABLE_SANDBOX_MODES.contains(&mode) => {
                Judgement::Widens(format!("the argv sets `sandbox_mode` to `{mode}`"))
            }
            Ok(Some(mode)) => Judgement::Unverifiable(format!(
                "`sandbox_mode` is `{mode}`, which is not a sandbox mode the grader knows"
            )),
        }
    }

    /// The rules of `permissions.NAME`, if the argv defines it.
    pub(super) fn permission_profile(&self, name: &str) -> Option<Result<ProfileRules, String>> {
        let permissions = self.root.get("permissions")?;
        let Some(permissions) = permissions.as_table() else {
            return Some(Err(format!(
                "`permissions` is {}, not a table",
                describe(permissions)
            )));
        };
        permissions
            .get(name)
            .map(|value| profile_rules(name, value))
    }

    /// The `permissions.NAME` table as the argv configures it, every override merged, with
    /// nothing reduced away (unlike [`Self::permission_profile`]): two launches whose tables
    /// are equal give the profile the same rules. `None` when the argv does not define it.
    pub(super) fn profile_table(&self, name: &str) -> Option<Result<&toml::Table, String>> {
        let permissions = self.root.get("permissions")?;
        let Some(permissions) = permissions.as_table() else {
            return Some(Err(format!(
                "`permissions` is {}, not a table",
                describe(permissions)
            )));
        };
        let value = permissions.get(name)?;
        Some(
            value
                .as_table()
                .ok_or_else(|| format!("`permissions.{name}` is {}, not a table", describe(value))),
        )
    }

    /// Whether the profile `name` grants no write access and no network beyond
    /// `network_allowed`.
    pub(super) fn judge_profile(&self, name: &str, network_allowed: bool) -> Judgement {
        if name == READ_ONLY_BUILTIN {
            return Judgement::ReadOnly(format!("`{name}` is the built-in read-only profile"));
        }
        if WRITABLE_BUILTINS.contains(&name) {
            return Judgement::Widens(format!("`{name}` is a built-in profile that allows writes"));
        }
        if name.starts_with(':') {
            return Judgement::Unverifiable(format!(
                "`{name}` is not a built-in profile the grader knows ({READ_ONLY_BUILTIN}, {})",
                WRITABLE_BUILTINS.join(", ")
            ));
        }
        let rules = match self.permission_profile(name) {
            None => {
                return Judgement::Unverifiable(format!(
                    "the profile `{name}` is not defined in the launch argv (`-c permissions.{name}=…`), so its rules are not shown"
                ))
            }
            Some(Err(e)) => return Judgement::Unverifiable(e),
            Some(Ok(rules)) => rules,
        };
        if !rules.writable.is_empty() {
            let paths: Vec<String> = rules.writable.iter().map(|p| format!("`{p}`")).collect();
            return Judgement::Widens(format!(
                "the profile `{name}` grants write access to {}",
                paths.join(", ")
            ));
        }
        if rules.network_enabled == Some(true) && !network_allowed {
            return Judgement::Widens(format!(
                "the profile `{name}` enables network access although the launch has network disabled"
            ));
        }
        Judgement::ReadOnly(format!(
            "the profile `{name}` grants no write access (network {})",
            if rules.network_enabled == Some(true) {
                "enabled"
            } else {
                "disabled"
            }
        ))
    }
}

/// `--enable` / `--disable` (`true` for enable), with the name when it is given as `=NAME`.
fn feature_flag(arg: &str) -> Option<(bool, Option<&str>)> {
    [("--enable", true), ("--disable", false)]
        .into_iter()
        .find_map(|(flag, on)| match arg.strip_prefix(flag)? {
            "" => Some((on, None)),
            rest => rest.strip_prefix('=').map(|name| (on, Some(name))),
        })
}

/// `key=value` → (key parts, value), by Codex's rules; an empty key part is refused here,
/// since no setting the grader reads can have one.
fn split_override(raw: &str) -> Result<(Vec<String>, toml::Value), String> {
    let (parts, value) = parse_override(raw).map_err(|e| match e {
        OverrideError::MissingEquals => "the override has no `=`".to_string(),
        OverrideError::EmptyKey => "the override has an empty key".to_string(),
    })?;
    if parts.iter().any(String::is_empty) {
        return Err(format!("the key `{}` has an empty part", parts.join(".")));
    }
    Ok((parts, value))
}

fn profile_rules(name: &str, value: &toml::Value) -> Result<ProfileRules, String> {
    let table = value.as_table().ok_or_else(|| {
        // Codex reads a value that is not valid TOML as a bare string; say so, since that is
        // the usual way a profile ends up a string.
        let hint = if value.is_str() {
            " (the value is not valid TOML, so it reads as a bare string)"
        } else {
            ""
        };
        format!(
            "`permissions.{name}` is {}, not a table{hint}; Codex would reject it",
            describe(value)
        )
    })?;
    let mut rules = ProfileRules::default();
    for (key, value) in table {
        match key.as_str() {
            "filesystem" => filesystem_rules(name, value, &mut rules.writable)?,
            "network" => rules.network_enabled = network_enabled(name, value)?,
            other => {
                return Err(format!(
                    "`permissions.{name}` sets `{other}`, whose effect on the sandbox the grader does not know"
                ))
            }
        }
    }
    Ok(rules)
}

fn filesystem_rules(
    name: &str,
    value: &toml::Value,
    writable: &mut Vec<String>,
) -> Result<(), String> {
    let table = value.as_table().ok_or_else(|| {
        format!(
            "`permissions.{name}.filesystem` is {}, not a table",
            describe(value)
        )
    })?;
    let mut grant = |path: String, access: &toml::Value| -> Result<(), String> {
        match access.as_str() {
            Some(ACCESS_WRITE) => {
                writable.push(path);
                Ok(())
            }
            Some(ACCESS_READ | ACCESS_NONE) => Ok(()),
            _ => Err(format!(
                "`permissions.{name}.filesystem` gives `{path}` the access {}; Codex knows only `{ACCESS_READ}`, `{ACCESS_WRITE}`, `{ACCESS_NONE}`",
                show_value(access)
            )),
        }
    };
    for (path, access) in table {
        match access.as_table() {
            // A scoped table, e.g. `":workspace_roots"={"."="read"}`: subpath → access.
            Some(scoped) => {
                for (subpath, access) in scoped {
                    grant(format!("{path}/{subpath}"), access)?;
                }
            }
            None => grant(path.clone(), access)?,
        }
    }
    Ok(())
}

fn network_enabled(name: &str, value: &toml::Value) -> Result<Option<bool>, String> {
    let table = value.as_table().ok_or_else(|| {
        format!(
            "`permissions.{name}.network` is {}, not a table",
            describe(value)
        )
    })?;
    let mut enabled = None;
    for (key, value) in table {
        match (key.as_str(), value) {
            ("enabled", toml::Value::Boolean(b)) => enabled = Some(*b),
            ("enabled", other) => {
                return Err(format!(
                    "`permissions.{name}.network.enabled` is {}, not a boolean",
                    describe(other)
                ))
            }
            (other, _) => {
                return Err(format!(
                    "`permissions.{name}.network` sets `{other}`, whose effect the grader does not know"
                ))
            }
        }
    }
    Ok(enabled)
}

fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("the string `{s}`"),
        toml::Value::Table(_) => "a table".into(),
        toml::Value::Array(_) => "an array".into(),
        other => format!("the {} {other}", other.type_str()),
    }
}

fn show_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("`{s}`"),
        other => describe(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn later_overrides_replace_earlier_ones_and_dotted_keys_merge() {
        let config = LaunchConfig::parse(&argv(&[
            "-c",
            r#"permissions.p={filesystem={":root"="write"}}"#,
            "--config",
            r#"permissions.p={filesystem={":root"="read"}}"#,
            r#"-cpermissions.p.network={enabled=false}"#,
            r#"--config=default_permissions="p""#,
        ]))
        .unwrap();
        assert_eq!(
            config.permission_profile("p"),
            Some(Ok(ProfileRules {
                writable: vec![],
                network_enabled: Some(false)
            }))
        );
        assert_eq!(config.selected_profile(None).unwrap(), "p");
        assert_eq!(
            config.source_of(&["permissions", "p", "filesystem"]),
            Some(r#"permissions.p={filesystem={":root"="read"}}"#)
        );
    }

    #[test]
    fn an_unparseable_value_is_a_bare_string_like_codex_reads_it() {
        let config = LaunchConfig::parse(&argv(&["-c", "default_permissions=plain-name"])).unwrap();
        assert_eq!(config.selected_profile(None).unwrap(), "plain-name");
    }

    #[test]
    fn quotes_stay_part_of_a_dotted_key() {
        let config = LaunchConfig::parse(&argv(&[
            "-c",
            r#"permissions."p".filesystem={":root"="read"}"#,
        ]))
        .unwrap();
        assert!(config.permission_profile("p").is_none());
        assert!(config.permission_profile("\"p\"").is_some());
    }

    #[test]
    fn argv_errors_name_the_element() {
        let err = LaunchConfig::parse(&argv(&["-c", "a=1", "--sandbox", "x"])).unwrap_err();
        assert_eq!(err.index, 2);
        assert_eq!(err.arg, "--sandbox");
        let err = LaunchConfig::parse(&argv(&["-c"])).unwrap_err();
        assert!(err.problem.contains("missing"), "{err}");
        let err = LaunchConfig::parse(&argv(&["-c", "no-equals-sign"])).unwrap_err();
        assert!(err.problem.contains("no `=`"), "{err}");
        assert!(LaunchConfig::parse(&argv(&["app-server", "-c", "a=1"])).is_ok());
        let err = LaunchConfig::parse(&argv(&["app-server", "--enable"])).unwrap_err();
        assert!(err.problem.contains("feature name is missing"), "{err}");
        let err = LaunchConfig::parse(&argv(&["--enabled", "x"])).unwrap_err();
        assert_eq!(err.arg, "--enabled");
    }

    #[test]
    fn feature_flags_set_features_after_the_overrides_disable_last() {
        let config = LaunchConfig::parse(&argv(&[
            "app-server",
            "--disable",
            "a",
            "--enable",
            "a",
            "--enable=b",
            "-c",
            "features.b=false",
            "-c",
            r#"sandbox_mode="read-only""#,
        ]))
        .unwrap();
        let features = config.root["features"].as_table().unwrap();
        assert_eq!(features["a"], toml::Value::Boolean(false));
        assert_eq!(features["b"], toml::Value::Boolean(true));
        assert_eq!(config.source_of(&["features", "a"]), Some("--disable"));
        assert!(matches!(
            config.judge_sandbox_settings(),
            Judgement::ReadOnly(_)
        ));
    }
}
