//! The launch policy: from the run mode, the execution target, the network setting, the policy
//! generation and the workspace, everything a driver sends to launch `codex app-server` and to
//! open threads and turns on it — and nothing else that would widen the sandbox.
//!
//! The program path and model-provider arguments are not the policy's business; they come from
//! `crate::run::AppServerProgram`.

pub(crate) mod identity;
pub mod profiles;
pub(crate) mod tools;
pub(crate) mod workspace;

pub use graders::events::{Mode, PolicyGeneration, Target};
use profiles::{HostPaths, Profile};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Environment variable: `1` means the execution target is itself the sandbox.
pub(crate) const ENV_EXTERNAL_SANDBOX: &str = "PAPERCLIP_RUNNER_EXTERNAL_SANDBOX";
/// Environment variable: `enabled` or `disabled` (network is off unless enabled).
pub(crate) const ENV_NETWORK_ACCESS: &str = "PAPERCLIP_RUNNER_NETWORK_ACCESS";

/// Names of the variables the shell tool may pass on to commands. Names only: values come from
/// the app-server's own (already allowlisted) environment and never appear in argv.
pub const SHELL_ENV_ALLOWLIST: &[&str] = &[
    "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ",
    "USER",
];

/// Feature switches: off what a conformance driver never needs and what would touch state
/// outside the workspace (shell snapshots run a login shell under HOME).
pub(crate) const FEATURE_SWITCHES: &[(&str, bool)] =
    &[("shell_snapshot", false), ("multi_agent", false)];

/// The approval policy sent on `thread/start`: Codex asks before escalating, and the driver
/// answers by its own rules (a planning run never approves a write).
pub(crate) const APPROVAL_POLICY: &str = "on-request";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    pub mode: Mode,
    pub target: Target,
    pub network_enabled: bool,
    pub policy: PolicyGeneration,
    pub workspace: PathBuf,
}

/// Per-turn parameters chosen by the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnParams {
    /// `permissions` on `turn/start`.
    pub permissions: Option<String>,
    /// `collaborationMode.mode` on `turn/start` (`plan` on planning turns only; `default` to
    /// leave plan mode on a follow-up turn of the same thread).
    pub collaboration_mode: Option<String>,
}

impl TurnParams {
    /// The `turn/start` params. `model` fills the collaboration mode's required
    /// `settings.model` (the model the thread reported on `thread/start`).
    pub(crate) fn to_params(&self, thread_id: &str, text: &str, model: &str) -> Value {
        let mut params = json!({
            "threadId": thread_id,
            "input": [{"type": "text", "text": text}],
        });
        if let Some(p) = &self.permissions {
            params["permissions"] = json!(p);
        }
        if let Some(mode) = &self.collaboration_mode {
            params["collaborationMode"] = collaboration_mode(mode, model);
        }
        params
    }
}

/// `{"mode":…,"settings":{"model":…,"reasoning_effort":null,"developer_instructions":null}}`
/// (`developer_instructions: null` selects Codex's built-in instructions for the mode).
pub(crate) fn collaboration_mode(mode: &str, model: &str) -> Value {
    json!({
        "mode": mode,
        "settings": {"model": model, "reasoning_effort": null, "developer_instructions": null}
    })
}

/// Everything the driver sends for one launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchPlan {
    pub request: LaunchRequest,
    /// The app-server argv after `app-server` and before the program's own extra arguments.
    pub argv: Vec<String>,
    /// `default_permissions`.
    pub default_profile: String,
    /// Every profile defined in argv (only the one the run uses).
    pub profiles: Vec<ProfileView>,
    /// `thread/start` params.
    pub thread_params: Value,
    /// Every turn of the run's mode (the first and any revision turn).
    pub turn_params: TurnParams,
    /// The turn after an approved plan (planning runs only).
    pub follow_up_turn_params: Option<TurnParams>,
    /// Stable digest of the launch without the profiles' filesystem/network rules.
    pub identity: String,
}

/// A profile as shown to users: its rules and the exact `-c` value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileView {
    #[serde(flatten)]
    pub(crate) profile: Profile,
    pub config_override: String,
}

impl LaunchPlan {
    /// The profile named `name`, if defined.
    pub(crate) fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .map(|v| &v.profile)
            .find(|p| p.name == name)
    }

    /// The profile every turn of this run uses.
    pub fn run_profile(&self) -> &Profile {
        self.profile(&self.default_profile)
            .expect("the default profile is always defined")
    }

    /// The summary the `run.started` event carries.
    pub fn summary(&self) -> graders::events::LaunchSummary {
        graders::events::LaunchSummary {
            mode: self.request.mode,
            target: self.request.target,
            network_enabled: self.request.network_enabled,
            policy: self.request.policy,
            argv: self.argv.clone(),
            thread_permissions: self.thread_params["permissions"].as_str().map(String::from),
            turn_permissions: self.turn_params.permissions.clone(),
            identity: self.identity.clone(),
        }
    }
}

/// The launch plan for `request` on a host whose app-server paths are `host`.
pub fn plan_with(request: &LaunchRequest, host: &HostPaths) -> LaunchPlan {
    let net = request.network_enabled;
    let external = request.target == Target::ExternalSandbox;
    // Only the profile the run uses is defined: a launch never carries a write-capable
    // profile it does not need (a planning launch defines nothing but its read-only profile).
    let run_profile = match (request.mode, external) {
        (Mode::Planning, true) if request.policy == PolicyGeneration::Current => {
            profiles::workspace_read_only_full_read(net)
        }
        (Mode::Planning, _) => profiles::workspace_read_only_narrow(host, net),
        (Mode::Standard | Mode::Ask, true) => profiles::external_sandbox(net),
        (Mode::Standard | Mode::Ask, false) => profiles::workspace(host, net),
    };
    let defined = vec![run_profile.clone()];
    let run_profile = run_profile.name.as_str();

    let mut argv = vec![
        "-c".to_string(),
        format!(
            "default_permissions={}",
            toml::Value::String(run_profile.into())
        ),
    ];
    for profile in &defined {
        argv.push("-c".into());
        argv.push(profile.config_override());
    }
    argv.push("-c".into());
    argv.push(shell_environment_policy());
    for (feature, on) in FEATURE_SWITCHES {
        argv.push("-c".into());
        argv.push(format!("features.{feature}={on}"));
    }

    let thread_params = json!({
        "cwd": request.workspace,
        "permissions": run_profile,
        "approvalPolicy": APPROVAL_POLICY,
        "dynamicTools": tools::dynamic_tools(),
    });
    let planning = request.mode == Mode::Planning;
    let turn_params = TurnParams {
        permissions: Some(run_profile.into()),
        collaboration_mode: planning.then(|| "plan".to_string()),
    };
    // Codex keeps a collaboration mode for subsequent turns, so the follow-up turn of a planning
    // thread names the default mode explicitly; its permissions stay the planning profile's.
    let follow_up_turn_params = planning.then(|| TurnParams {
        permissions: Some(run_profile.into()),
        collaboration_mode: Some("default".into()),
    });
    let identity = identity::digest(&identity::identity_input(
        request,
        &argv,
        &thread_params,
        &turn_params,
        follow_up_turn_params.as_ref(),
    ));
    LaunchPlan {
        request: request.clone(),
        argv,
        default_profile: run_profile.into(),
        profiles: defined
            .into_iter()
            .map(|profile| ProfileView {
                config_override: profile.config_override(),
                profile,
            })
            .collect(),
        thread_params,
        turn_params,
        follow_up_turn_params,
        identity,
    }
}

fn shell_environment_policy() -> String {
    let names: Vec<String> = SHELL_ENV_ALLOWLIST
        .iter()
        .map(|n| toml::Value::String((*n).into()).to_string())
        .collect();
    format!(
        "shell_environment_policy={{inherit=\"all\",include_only=[{}]}}",
        names.join(",")
    )
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LaunchEnvError {
    #[error("{ENV_NETWORK_ACCESS} must be `enabled` or `disabled`, got `{0}`")]
    BadNetwork(String),
    #[error("{ENV_EXTERNAL_SANDBOX} must be `1` or `0`, got `{0}`")]
    BadExternalSandbox(String),
}

/// The target when none is configured explicitly: an external sandbox when
/// `PAPERCLIP_RUNNER_EXTERNAL_SANDBOX=1`, else local.
pub fn target_from(lookup: impl Fn(&str) -> Option<String>) -> Result<Target, LaunchEnvError> {
    match lookup(ENV_EXTERNAL_SANDBOX).as_deref().map(str::trim) {
        None | Some("") | Some("0") => Ok(Target::Local),
        Some("1") => Ok(Target::ExternalSandbox),
        Some(other) => Err(LaunchEnvError::BadExternalSandbox(other.into())),
    }
}

/// Network access: on only when `PAPERCLIP_RUNNER_NETWORK_ACCESS=enabled`.
pub fn network_from(lookup: impl Fn(&str) -> Option<String>) -> Result<bool, LaunchEnvError> {
    match lookup(ENV_NETWORK_ACCESS).as_deref().map(str::trim) {
        None | Some("") | Some("disabled") => Ok(false),
        Some("enabled") => Ok(true),
        Some(other) => Err(LaunchEnvError::BadNetwork(other.into())),
    }
}

/// `lookup` over this process's environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
