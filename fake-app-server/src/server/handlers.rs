//! One handler per client method, answering like Codex 0.169.0 (the thread lifecycle is in
//! `threads`, the settings methods in `settings`).

use super::admin;
use super::gate::{check_thread_id, gate, require_initialized};
use super::interrupt::{InterruptAnswer, PendingInterruptAnswer};
use super::services;
use super::settings::{self, model_of};
use super::state::server_cwd;
use super::state::{ActiveTurn, State, ThreadState, TurnSignal};
use super::threads;
use super::turn::{self, TurnPlan};
use super::{Reply, Shared};
use crate::protocol::shapes;
use crate::protocol::{self, parse_params, RpcError};
use crate::sandbox::policy::{LegacyPolicy, Permissions};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// How the fake answers one client method.
type Handler = fn(&Arc<Shared>, Option<&Value>) -> Reply;

/// The methods the fake answers by behaviour. The others it answers from the persona's
/// recorded answers (`static_answers.json`), or, listed with the reason in its
/// `unimplemented.toml`, with `-32603`; a test holds the three to the release's client methods.
fn handler(method: &str) -> Option<Handler> {
    let handler: Handler = match method {
        "initialize" => initialize,
        "thread/start" => threads::thread_start,
        "thread/resume" => threads::thread_resume,
        "thread/read" => threads::thread_read,
        "thread/fork" => admin::thread_fork,
        "thread/list" => admin::thread_list,
        "thread/loaded/list" => admin::thread_loaded_list,
        "thread/turns/list" => admin::thread_turns_list,
        "thread/items/list" => admin::thread_items_list,
        "thread/name/set" => admin::thread_name_set,
        "thread/goal/get" => admin::thread_goal_get,
        "thread/goal/clear" => admin::thread_goal_clear,
        "thread/backgroundTerminals/list" => admin::background_terminals_list,
        "thread/backgroundTerminals/terminate" => admin::background_terminals_terminate,
        "thread/unsubscribe" => admin::thread_unsubscribe,
        "thread/archive" => admin::thread_archive,
        "thread/unarchive" => admin::thread_unarchive,
        "thread/delete" => admin::thread_delete,
        "thread/settings/update" => settings::thread_settings_update,
        "turn/start" => turn_start,
        "turn/steer" => |shared, params| Reply::from(turn_steer(shared, params)),
        "turn/interrupt" => turn_interrupt,
        "command/exec" => |shared, params| Reply::from(command_exec(shared, params)),
        "permissionProfile/list" => {
            |shared, params| Reply::from(permission_profile_list(shared, params))
        }
        "account/read" => |shared, params| Reply::from(services::account_read(shared, params)),
        "account/login/start" => |_, params| services::account_login_start(params),
        "account/login/cancel" => services::account_login_cancel,
        "config/read" => |shared, params| Reply::from(settings::config_read(shared, params)),
        "config/batchWrite" => settings::config_batch_write,
        "mcpServer/oauth/login" => services::mcp_server_oauth_login,
        "model/list" => |_, params| Reply::from(settings::model_list(params)),
        "skills/list" => |_, params| Reply::from(settings::skills_list(params)),
        "hooks/list" => services::hooks_list,
        "collaborationMode/list" => {
            |_, params| Reply::from(settings::collaboration_mode_list(params))
        }
        _ => return None,
    };
    Some(handler)
}

pub(super) fn handle(shared: &Arc<Shared>, method: &str, params: Option<&Value>) -> Reply {
    if !protocol::is_client_method(method) {
        return Reply::err(protocol::unknown_method(method));
    }
    // The release's gate of its experimental methods and fields, for an initialized client
    // that did not declare the experimental API (before that, every method is refused as not
    // initialized).
    let gated = {
        let state = shared.state();
        (state.initialized && !state.experimental_api)
            .then(|| crate::persona::current().experimental_refusal(method, params))
            .flatten()
    };
    if let Some(refusal) = gated {
        return Reply::err(RpcError::invalid(refusal));
    }
    if let Some(handler) = handler(method) {
        return handler(shared, params);
    }
    let persona = crate::persona::current();
    if let Some(recorded) = persona.static_answer(method) {
        return match require_initialized(shared) {
            Ok(()) => recorded_reply(recorded),
            Err(error) => Reply::err(error),
        };
    }
    let reason = persona
        .unimplemented_reason(method)
        .unwrap_or("not listed in the persona's unimplemented.toml");
    eprintln!(
        "fake-app-server: `{method}` is a Codex method the fake does not implement: {reason}"
    );
    Reply::err(RpcError::internal(format!(
        "fake-app-server does not implement `{method}` (personas/{}/unimplemented.toml: {reason})",
        persona.version
    )))
}

/// A recorded answer (`static_answers.json`): the result or error, with the notifications the
/// release sent before and after it.
fn recorded_reply(recorded: &Value) -> Reply {
    let notifications = |key: &str| -> Vec<Value> {
        recorded[key]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|n| {
                        shapes::notification(
                            n["method"].as_str().unwrap_or_default(),
                            n["params"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let result = match recorded.get("error") {
        Some(error) => Err(RpcError {
            code: error["code"]
                .as_i64()
                .unwrap_or(crate::protocol::INTERNAL_ERROR),
            message: error["message"].as_str().unwrap_or_default().to_string(),
        }),
        None => Ok(recorded["result"].clone()),
    };
    Reply {
        before: notifications("before"),
        then: notifications("after"),
        ..Reply::from(result)
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
    /// Exact notification method names suppressed for this connection
    /// (InitializeCapabilities.optOutNotificationMethods).
    #[serde(default)]
    opt_out_notification_methods: Option<Vec<String>>,
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
        let capabilities = params.capabilities.as_ref();
        state.experimental_api = capabilities.is_some_and(|c| c.experimental_api);
        state.client_name = params.client_info.name.clone();
        let opted_out = capabilities
            .and_then(|c| c.opt_out_notification_methods.clone())
            .unwrap_or_default();
        shared
            .out
            .declare_client(state.experimental_api, &opted_out);
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
        json!({"status": "disabled", "serverName": hostname(), "installationId": super::state::installation_id(), "environmentId": null}),
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
        after: Some(after),
        ..Reply::then(result, then)
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
            return Ok(Reply::ok(shapes::turn_start_result(in_progress_turn(
                &active.id,
            ))));
        }
        let (turn_id, plan) = begin_turn(shared, thread, params)?;
        drop(state);
        // Counted from now, not from when its thread first runs: input that ends right after
        // this turn/start still waits for the turn (`TURNS_AFTER_END_OF_INPUT`).
        let running = shared.turn_player();
        let shared_for_turn = Arc::clone(shared);
        let starter = Arc::clone(shared);
        Ok(Reply {
            after: Some(Box::new(move || {
                starter.start_turn(Box::new(move || {
                    std::thread::spawn(move || turn::play(shared_for_turn, plan, running));
                }));
            })),
            ..Reply::ok(shapes::turn_start_result(in_progress_turn(&turn_id)))
        })
    };
    run().unwrap_or_else(Reply::err)
}

/// A new turn on `thread`, which has none running: the turn's settings applied, the thread
/// marked as running it; its id and what its player needs.
fn begin_turn(
    shared: &Arc<Shared>,
    thread: &mut ThreadState,
    params: TurnStartParams,
) -> Result<(String, TurnPlan), RpcError> {
    if params.settings.apply(shared, thread)? {
        // Codex 0.169 reports changed settings before it answers (measured: a new
        // collaboration mode, model, effort or approval policy).
        shared.out.send(&settings::settings_updated(shared, thread));
    }
    let text = threads::user_text(&params.input);
    if thread.preview.is_empty() {
        thread.preview = text.clone();
    }
    let turn_index = thread.turns_started;
    let first_turn = turn_index == 0;
    let output_schema = params.output_schema.as_ref().is_some_and(|s| !s.is_null());
    let script = threads::script_after_inputs(shared, thread, 1, output_schema);
    if first_turn {
        // Codex writes a thread's rollout when its first turn starts (measured): from
        // now on the thread can be resumed, also by a later process.
        thread.persist();
    }
    let plan = TurnPlan::begin(
        shared,
        thread,
        turn::TurnStart {
            index: turn_index,
            output_schema,
            input: json!(params.input),
            user_text: text,
            script,
        },
    );
    let (model, _) = model_of(shared, Some(thread));
    if !settings::in_catalog(&model) {
        // Codex warns before it answers turn/start (measured with 0.169).
        shared
            .out
            .send(&settings::missing_metadata_warning(&model, &thread.id));
    }
    let turn_id = plan.turn_id.clone();
    Ok((turn_id, plan))
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
        .ok_or_else(|| super::gate::thread_not_found(thread_id))?;
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
    let turn_id = signal_active_turn(
        shared,
        &params.thread_id,
        "steer",
        &params.expected_turn_id,
        |expected, found| format!("expected active turn id `{expected}` but found `{found}`"),
        TurnSignal::Steer(json!(params.input)),
    )?;
    Ok(json!({"turnId": turn_id}))
}

/// Send `signal` to the thread's active turn when it is `expected` (else Codex's `mismatch`
/// words); the active turn's id.
fn signal_active_turn(
    shared: &Arc<Shared>,
    thread_id: &str,
    action: &str,
    expected: &str,
    mismatch: fn(&str, &str) -> String,
    signal: TurnSignal,
) -> Result<String, RpcError> {
    require_initialized(shared)?;
    check_thread_id(thread_id)?;
    let state = shared.state();
    let active = active_turn(&state, thread_id, action)?;
    if active.id != expected {
        return Err(RpcError::invalid(mismatch(expected, &active.id)));
    }
    let _ = active.signals.send(signal);
    Ok(active.id.clone())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TurnInterruptParams {
    thread_id: String,
    turn_id: String,
}

fn turn_interrupt(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let signalled = || -> Result<PendingInterruptAnswer, RpcError> {
        let params: TurnInterruptParams = parse_params(params)?;
        let (answer, pending) = InterruptAnswer::new();
        signal_active_turn(
            shared,
            &params.thread_id,
            "interrupt",
            &params.turn_id,
            |expected, found| format!("expected active turn id {expected} but found {found}"),
            TurnSignal::Interrupt(answer),
        )?;
        Ok(pending)
    };
    match signalled() {
        // The state's lock is released: the turn takes it to end.
        Ok(pending) => Reply {
            after: pending.wait(),
            ..Reply::ok(json!({}))
        },
        Err(e) => Reply::err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each release's client methods are answered by behaviour, from its recorded answers, or
    /// listed as not implemented, with the reason: exactly one of the three, and the lists name
    /// nothing else.
    #[test]
    fn every_client_method_is_implemented_recorded_or_listed_with_a_reason() {
        for persona in crate::persona::all() {
            let methods: std::collections::BTreeSet<&str> = persona.client_methods().collect();
            for method in &methods {
                let ways = [
                    handler(method).is_some(),
                    persona.static_answer(method).is_some(),
                    persona.unimplemented_reason(method).is_some(),
                ];
                assert_eq!(
                    ways.iter().filter(|w| **w).count(),
                    1,
                    "{} `{method}`: handler, recorded answer, unimplemented: {ways:?}",
                    persona.version
                );
            }
            for listed in persona.unimplemented().chain(persona.static_answers()) {
                assert!(
                    methods.contains(listed),
                    "{}: `{listed}` is no client method of the release",
                    persona.version
                );
            }
            for method in persona.unimplemented() {
                let reason = persona.unimplemented_reason(method).unwrap_or_default();
                assert!(!reason.trim().is_empty(), "{} `{method}`", persona.version);
            }
        }
    }
}
