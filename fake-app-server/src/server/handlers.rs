//! One handler per client method, answering like Codex 0.169.0 (the thread lifecycle is in
//! `threads`, the settings methods in `settings`).

use super::gate::{check_thread_id, gate, require_initialized};
use super::settings::{self, model_of};
use super::state::{ActiveTurn, State, TurnSignal};
use super::threads::{self, server_cwd};
use super::turn::{self, TurnPlan};
use super::{Reply, Shared};
use crate::protocol::shapes;
use crate::protocol::{self, parse_params, RpcError};
use crate::sandbox::policy::{LegacyPolicy, Permissions};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

pub fn handle(shared: &Arc<Shared>, method: &str, params: Option<&Value>) -> Reply {
    if !protocol::is_client_method(method) {
        return Reply::err(protocol::unknown_method(method));
    }
    let result = match method {
        "initialize" => return initialize(shared, params),
        "thread/start" => return threads::thread_start(shared, params),
        "thread/resume" => return threads::thread_resume(shared, params),
        "thread/read" => return threads::thread_read(shared, params),
        "turn/start" => return turn_start(shared, params),
        "turn/steer" => turn_steer(shared, params),
        "turn/interrupt" => turn_interrupt(shared, params),
        "command/exec" => command_exec(shared, params),
        "permissionProfile/list" => permission_profile_list(shared, params),
        "account/read" => settings::account_read(shared, params),
        "account/login/start" => return settings::account_login_start(params),
        "config/read" => settings::config_read(shared, params),
        "model/list" => settings::model_list(params),
        "skills/list" => settings::skills_list(params),
        "collaborationMode/list" => settings::collaboration_mode_list(params),
        "thread/settings/update" => return settings::thread_settings_update(shared, params),
        other => {
            eprintln!("fake-app-server: `{other}` is a Codex method the fake does not implement");
            Err(RpcError::internal(format!(
                "fake-app-server does not implement `{other}`"
            )))
        }
    };
    match result {
        Ok(value) => Reply::ok(value),
        Err(error) => Reply::err(error),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    client_info: ClientInfo,
    #[serde(default)]
    capabilities: Option<Capabilities>,
}

#[derive(Deserialize)]
struct ClientInfo {
    name: String,
    version: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Capabilities {
    #[serde(default)]
    experimental_api: bool,
}

fn os_description() -> String {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |key: &str| {
        release
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(|v| v.trim_matches('"').to_string())
    };
    let name = field("NAME").map(|n| n.split_whitespace().next().unwrap_or("Linux").to_string());
    let version = field("VERSION_ID").unwrap_or_default();
    let mut parts: Vec<&str> = version.split('.').collect();
    while parts.len() < 3 {
        parts.push("0");
    }
    format!(
        "{} {}",
        name.unwrap_or_else(|| "Linux".into()),
        parts.join(".")
    )
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn initialize(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let params: InitializeParams = match parse_params(params) {
        Ok(p) => p,
        Err(e) => return Reply::err(e),
    };
    {
        let mut state = shared.state();
        if state.initialized {
            return Reply::err(RpcError::invalid("Already initialized"));
        }
        state.initialized = true;
        state.experimental_api = params.capabilities.is_some_and(|c| c.experimental_api);
        state.client_name = params.client_info.name.clone();
    }
    let terminal = std::env::var("TERM")
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let ClientInfo { name, version } = params.client_info;
    let result = json!({
        "userAgent": format!("{name}/{} ({}; {}) {terminal} ({name}; {version})", shapes::cli_version(), os_description(), std::env::consts::ARCH),
        "codexHome": super::codex_home(),
        "platformFamily": "unix",
        "platformOs": "linux",
    });
    let then = vec![shapes::notification(
        "remoteControl/status/changed",
        json!({"status": "disabled", "serverName": hostname(), "installationId": uuid::Uuid::new_v4().to_string(), "environmentId": null}),
    )];
    // The start-up probe's warning goes out once the probe is done, off the initialize path (the
    // real server's warning also arrives late, e.g. just before a failing thread/start answer).
    let warner = Arc::clone(shared);
    let after: Box<dyn FnOnce() + Send> = Box::new(move || {
        std::thread::spawn(move || {
            if let Some(summary) = warner.startup_warning() {
                warner.out.send(&shapes::notification(
                    "configWarning",
                    json!({"summary": summary, "details": null}),
                ));
            }
        });
    });
    Reply {
        result: Ok(result),
        then,
        after: Some(after),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnStartParams {
    thread_id: String,
    input: Vec<Value>,
    #[serde(default)]
    output_schema: Option<Value>,
    /// The thread settings the turn changes (from now on, for later turns too).
    #[serde(flatten)]
    settings: settings::SettingsChange,
}

fn in_progress_turn(id: &str) -> Value {
    shapes::turn(&shapes::TurnView {
        id,
        items: Vec::new(),
        items_view: "notLoaded",
        status: "inProgress",
        error: Value::Null,
        started_at: None,
        completed_at: None,
        duration_ms: None,
    })
}

fn turn_start(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Reply, RpcError> {
        let params: TurnStartParams = parse_params(params)?;
        require_initialized(shared)?;
        gate(
            shared,
            "turn/start",
            "permissions",
            params.settings.permissions.is_some(),
        )?;
        gate(
            shared,
            "turn/start",
            "collaborationMode",
            params.settings.collaboration_mode.is_some(),
        )?;
        check_thread_id(&params.thread_id)?;
        let mut state = shared.state();
        let thread = state.thread_mut(&params.thread_id)?;
        if let Some(active) = &thread.active {
            // Codex folds input sent during a running turn into that turn.
            let _ = active.signals.send(TurnSignal::Steer(json!(params.input)));
            return Ok(Reply::ok(json!({"turn": in_progress_turn(&active.id)})));
        }
        if params.settings.apply(shared, thread)? {
            // Codex 0.169 reports changed settings before it answers (measured: a new
            // collaboration mode, model, effort or approval policy).
            shared.out.send(&settings::settings_updated(shared, thread));
        }
        let text = threads::user_text(&params.input);
        if thread.preview.is_empty() {
            thread.preview = text.clone();
        }
        let first_turn = thread.turns_started == 0;
        let output_schema = params.output_schema.as_ref().is_some_and(|s| !s.is_null());
        let script = threads::script_after_inputs(shared, thread, 1, output_schema);
        if first_turn {
            // Codex writes a thread's rollout when its first turn starts (measured): from
            // now on the thread can be resumed, also by a later process.
            thread.persist();
        }
        let turn_id = crate::ids::uuid_v7();
        let (signals_tx, signals_rx) = std::sync::mpsc::channel();
        thread.active = Some(ActiveTurn {
            id: turn_id.clone(),
            signals: signals_tx.clone(),
            output_schema,
        });
        let (model, _) = model_of(shared, Some(thread));
        if !settings::in_catalog(&model) {
            // Codex warns before it answers turn/start (measured with 0.169).
            shared
                .out
                .send(&settings::missing_metadata_warning(&model, &thread.id));
        }
        let plan = TurnPlan {
            thread_id: thread.id.clone(),
            approvals_reviewer: thread.approvals_reviewer.clone(),
            plan_mode: thread
                .collaboration_mode
                .as_ref()
                .is_some_and(|mode| mode["mode"] == "plan"),
            tokens_before: thread.tokens_used,
            turn_id: turn_id.clone(),
            cwd: thread.cwd.clone(),
            permissions: thread.permissions.clone(),
            approval_policy: thread.approval_policy.clone(),
            dynamic_tools: thread.dynamic_tools.clone(),
            input: json!(params.input),
            user_text: text,
            script,
            signals: signals_rx,
            self_signal: signals_tx,
        };
        drop(state);
        let shared_for_turn = Arc::clone(shared);
        Ok(Reply {
            result: Ok(json!({"turn": in_progress_turn(&turn_id)})),
            then: Vec::new(),
            after: Some(Box::new(move || {
                std::thread::spawn(move || turn::play(shared_for_turn, plan));
            })),
        })
    };
    run().unwrap_or_else(Reply::err)
}

/// The turn running on `thread_id`, which the client wants to `action` (steer, interrupt).
fn active_turn<'a>(
    state: &'a State,
    thread_id: &str,
    action: &str,
) -> Result<&'a ActiveTurn, RpcError> {
    let thread = state
        .threads
        .get(thread_id)
        .ok_or_else(|| RpcError::invalid(format!("thread not found: {thread_id}")))?;
    thread
        .active
        .as_ref()
        .ok_or_else(|| RpcError::invalid(format!("no active turn to {action}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnSteerParams {
    thread_id: String,
    input: Vec<Value>,
    expected_turn_id: String,
}

fn turn_steer(shared: &Arc<Shared>, params: Option<&Value>) -> Result<Value, RpcError> {
    let params: TurnSteerParams = parse_params(params)?;
    require_initialized(shared)?;
    check_thread_id(&params.thread_id)?;
    let state = shared.state();
    let active = active_turn(&state, &params.thread_id, "steer")?;
    if active.id != params.expected_turn_id {
        return Err(RpcError::invalid(format!(
            "expected active turn id `{}` but found `{}`",
            params.expected_turn_id, active.id
        )));
    }
    let _ = active.signals.send(TurnSignal::Steer(json!(params.input)));
    Ok(json!({"turnId": active.id}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnInterruptParams {
    thread_id: String,
    turn_id: String,
}

fn turn_interrupt(shared: &Arc<Shared>, params: Option<&Value>) -> Result<Value, RpcError> {
    let params: TurnInterruptParams = parse_params(params)?;
    require_initialized(shared)?;
    check_thread_id(&params.thread_id)?;
    let state = shared.state();
    let active = active_turn(&state, &params.thread_id, "interrupt")?;
    if active.id != params.turn_id {
        return Err(RpcError::invalid(format!(
            "expected active turn id {} but found {}",
            params.turn_id, active.id
        )));
    }
    let _ = active.signals.send(TurnSignal::Interrupt);
    Ok(json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandExecParams {
    command: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    permission_profile: Option<String>,
    #[serde(default)]
    sandbox_policy: Option<Value>,
}

fn command_exec(shared: &Arc<Shared>, params: Option<&Value>) -> Result<Value, RpcError> {
    let params: CommandExecParams = parse_params(params)?;
    require_initialized(shared)?;
    gate(
        shared,
        "command/exec",
        "permissionProfile",
        params.permission_profile.is_some(),
    )?;
    if params.permission_profile.is_some() && params.sandbox_policy.is_some() {
        return Err(RpcError::invalid(
            "`permissionProfile` cannot be combined with `sandboxPolicy`",
        ));
    }
    if params.command.is_empty() {
        return Err(RpcError::invalid("command must not be empty"));
    }
    let permissions = match (&params.permission_profile, &params.sandbox_policy) {
        (_, Some(policy)) => {
            Permissions::Legacy(LegacyPolicy::from_policy_json(policy).map_err(RpcError::invalid)?)
        }
        (profile, None) => Permissions::Profile(
            shared
                .config
                .profile(profile.as_deref())
                .map_err(|e| RpcError::invalid(format!("invalid permission profile: {e}")))?,
        ),
    };
    let cwd = params.cwd.map(PathBuf::from).unwrap_or_else(server_cwd);
    let policy = permissions.exec_policy(&cwd);
    let result = shared.sandbox.run(&params.command, &cwd, &policy, false);
    Ok(json!({"exitCode": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}))
}

#[derive(Deserialize)]
struct AnyParams {}

fn permission_profile_list(
    shared: &Arc<Shared>,
    params: Option<&Value>,
) -> Result<Value, RpcError> {
    let _: AnyParams = parse_params(params)?;
    require_initialized(shared)?;
    let data: Vec<Value> = shared
        .config
        .profile_ids()
        .into_iter()
        .map(|id| json!({"id": id, "description": null, "allowed": true}))
        .collect();
    Ok(json!({"data": data, "nextCursor": null}))
}
