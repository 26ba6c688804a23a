//! The thread lifecycle, answering like Codex 0.169.0: `thread/start` (permissions, trust,
//! instructions), `thread/resume` and `thread/read`.

use super::gate::{check_session_id, check_thread_id, gate, require_initialized};
use super::settings::{self, model_of};
use super::state::{server_cwd, ThreadState};
use super::{Reply, Shared};
use crate::protocol::shapes::{self, ThreadSettingsView};
use crate::protocol::{parse_params, RpcError};
use crate::sandbox::policy::{LegacyPolicy, Permissions};
use crate::scenario::{ScenarioTurn, TurnOrigin};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadStartParams {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    permissions: Option<String>,
    #[serde(default)]
    sandbox: Option<String>,
    #[serde(default)]
    ephemeral: Option<bool>,
    #[serde(default)]
    approval_policy: Option<Value>,
    #[serde(default)]
    approvals_reviewer: Option<String>,
    #[serde(default)]
    model: Option<String>,
    /// Config overrides for this thread (codex-acp sets `projects.<cwd>.trust_level`).
    #[serde(default)]
    config: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    dynamic_tools: Option<Vec<DynamicToolSpec>>,
    #[serde(default)]
    history_mode: Option<String>,
    #[serde(default)]
    daybreak_enabled: Option<bool>,
    /// Deprecated (it selects no style) yet kept: Codex 0.169 reports it in the thread's
    /// settings (measured with `harness explore`).
    #[serde(default)]
    personality: Option<Value>,
    #[serde(default)]
    experimental_raw_events: Option<bool>,
}

#[derive(Deserialize)]
struct DynamicToolSpec {
    name: String,
}

/// What a thread's `config` says about its instructions: whether project instruction files are
/// read at all (`project_doc_max_bytes = 0` reads none: Codex 0.169 then reports no instruction
/// source, measured), after checking `skills.include_instructions` as Codex does (a boolean).
fn project_docs_wanted(config: Option<&serde_json::Map<String, Value>>) -> Result<bool, RpcError> {
    let Some(config) = config else {
        return Ok(true);
    };
    if let Some(include) = config
        .get("skills")
        .and_then(|s| s.get("include_instructions"))
        .filter(|v| !v.is_boolean())
    {
        return Err(RpcError::invalid(format!(
            "failed to load configuration: invalid type: {}, expected a boolean\nin `skills.include_instructions`\n",
            describe_json_type(include)
        )));
    }
    Ok(config.get("project_doc_max_bytes").and_then(Value::as_u64) != Some(0))
}

/// serde's wording for an unexpected JSON value (`string "x"`, `integer `3``).
fn describe_json_type(value: &Value) -> String {
    match value {
        Value::String(s) => format!("string {s:?}"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::Array(_) => "sequence".into(),
        Value::Object(_) => "map".into(),
        Value::Null => "unit value".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
    }
}

/// Load AGENTS.md the way the permissions require: through the sandboxed helper under
/// restricted reads, directly otherwise; nothing when the thread reads no project docs.
fn load_instructions(
    shared: &Shared,
    permissions: &Permissions,
    cwd: &std::path::Path,
    project_docs: bool,
) -> Result<Vec<String>, RpcError> {
    if !project_docs {
        return Ok(Vec::new());
    }
    let sources = if permissions.needs_fs_helper() {
        shared.sandbox.load_agents_md_sandboxed(cwd).map_err(|status_and_stderr| {
            RpcError::internal(format!(
                "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status {status_and_stderr}"
            ))
        })?
    } else {
        let agents = cwd.join("AGENTS.md");
        agents.is_file().then_some(agents)
    };
    Ok(sources
        .into_iter()
        .map(|p| p.display().to_string())
        .collect())
}

pub(super) fn settings_view<'a>(
    thread: &'a ThreadState,
    model: &'a str,
    provider: &'a str,
) -> ThreadSettingsView<'a> {
    ThreadSettingsView {
        cwd: thread.cwd.to_str().unwrap_or(""),
        model,
        model_provider: provider,
        service_tier: &thread.model_settings.service_tier,
        instruction_sources: thread.instruction_sources.clone(),
        approval_policy: &thread.approval_policy,
        approvals_reviewer: &thread.approvals_reviewer,
        sandbox: thread.permissions.projection(),
        active_permission_profile: thread.permissions.active_profile(),
    }
}

/// Whether `cwd` is a trusted project, by the thread's `config` or the `-c` overrides
/// (`projects."<cwd>".trust_level = "trusted"`).
fn trusted_project(
    shared: &Shared,
    thread_config: Option<&serde_json::Map<String, Value>>,
    cwd: &std::path::Path,
) -> bool {
    let key = cwd.display().to_string();
    let from_thread = thread_config
        .and_then(|c| c.get("projects"))
        .and_then(|p| p.get(&key))
        .and_then(|p| p.get("trust_level"))
        .and_then(Value::as_str);
    let from_flags = shared
        .config
        .session_flags
        .get("projects")
        .and_then(|p| p.get(&key))
        .and_then(|p| p.get("trust_level"))
        .and_then(toml::Value::as_str);
    from_thread.or(from_flags) == Some("trusted")
}

fn resolve_permissions(
    shared: &Shared,
    profile: Option<&str>,
    sandbox: Option<&str>,
) -> Result<Permissions, RpcError> {
    resolve_permissions_in(shared, profile, sandbox, false)
}

/// Like [`resolve_permissions`]; without a choice, a trusted project gets `:workspace` (Codex
/// 0.169, measured) unless `default_permissions` names a profile.
fn resolve_permissions_in(
    shared: &Shared,
    profile: Option<&str>,
    sandbox: Option<&str>,
    trusted: bool,
) -> Result<Permissions, RpcError> {
    let profile = match profile {
        None if sandbox.is_none() && trusted && shared.config.default_permissions.is_none() => {
            Some(":workspace")
        }
        other => other,
    };
    match (profile, sandbox) {
        (Some(_), Some(_)) => Err(RpcError::invalid(
            "`permissions` cannot be combined with `sandbox`",
        )),
        (None, Some(mode)) => Ok(Permissions::Legacy(
            LegacyPolicy::from_mode(mode).map_err(RpcError::invalid)?,
        )),
        (profile, None) => shared
            .config
            .profile(profile)
            .map(Permissions::Profile)
            .map_err(|e| RpcError::invalid(format!("failed to load configuration: {e}"))),
    }
}

pub(super) fn thread_start(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    // Whether `serviceTier` was sent at all, and as what: the release answers a JSON `null`
    // otherwise than no field (the persona's recorded table).
    let asked_tier = params.and_then(|p| p.get("serviceTier")).cloned();
    match start(shared, params, asked_tier.as_ref()) {
        Ok((result, thread_json, warning)) => Reply::then(
            result,
            std::iter::once(shapes::notification(
                "thread/started",
                json!({"thread": thread_json}),
            ))
            .chain(warning)
            .collect(),
        ),
        Err(error) => Reply::err(error),
    }
}

/// `thread/start`'s work: the thread, its answer, its `thread/started` and the warning that
/// comes with it.
fn start(
    shared: &Arc<Shared>,
    params: Option<&Value>,
    asked_tier: Option<&Value>,
) -> Result<(Value, Value, Option<Value>), RpcError> {
    let params: ThreadStartParams = parse_params(params)?;
    require_initialized(shared)?;
    gate(
        shared,
        "thread/start",
        "permissions",
        params.permissions.is_some(),
    )?;
    gate(
        shared,
        "thread/start",
        "dynamicTools",
        params.dynamic_tools.is_some(),
    )?;
    let cwd = params.cwd.map(PathBuf::from).unwrap_or_else(server_cwd);
    let permissions = resolve_permissions_in(
        shared,
        params.permissions.as_deref(),
        params.sandbox.as_deref(),
        trusted_project(shared, params.config.as_ref(), &cwd),
    )?;
    let project_docs = project_docs_wanted(params.config.as_ref())?;
    let instruction_sources = load_instructions(shared, &permissions, &cwd, project_docs)?;
    let ephemeral = params.ephemeral.unwrap_or(false);
    // Measured with 0.169 (`harness explore`): refused for `false` as for `true`.
    if ephemeral && params.daybreak_enabled.is_some() {
        return Err(RpcError::invalid(
            "daybreakEnabled is not supported for ephemeral threads",
        ));
    }
    let id = crate::ids::uuid_v7();
    let now = shapes::now_s();
    let thread = ThreadState {
        path: if ephemeral {
            None
        } else {
            super::state::new_thread_file(&id)
        },
        id: id.clone(),
        cwd,
        ephemeral,
        start_index: 0,
        permissions,
        approval_policy: params
            .approval_policy
            .unwrap_or_else(|| json!("on-request")),
        approvals_reviewer: super::settings::reviewer(params.approvals_reviewer)
            .unwrap_or_else(|| "user".into()),
        model: params.model,
        collaboration_mode: None,
        model_settings: super::state::ModelSettings {
            service_tier: crate::persona::current().service_tier_answer(asked_tier),
            personality: params.personality.unwrap_or(Value::Null),
            ..Default::default()
        },
        history: shapes::HistoryChoice {
            history_mode: params.history_mode.unwrap_or_else(|| "paginated".into()),
            daybreak_enabled: params.daybreak_enabled,
        },
        name: None,
        forked_from: None,
        tokens_used: 0,
        dynamic_tools: params
            .dynamic_tools
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.name)
            .collect(),
        raw_events: params.experimental_raw_events.unwrap_or(false),
        features: params
            .config
            .as_ref()
            .and_then(|config| config.get("features"))
            .and_then(Value::as_object)
            .cloned(),
        instruction_sources,
        preview: String::new(),
        created_at: now,
        updated_at: now,
        turns: Vec::new(),
        turns_started: 0,
        active: None,
    };
    Ok(register_started(shared, thread, id))
}

/// The started thread in the state: its answer, its `thread/started` payload and the warning
/// that comes with it.
fn register_started(
    shared: &Arc<Shared>,
    thread: ThreadState,
    id: String,
) -> (Value, Value, Option<Value>) {
    let (model, provider) = model_of(shared, Some(&thread));
    let originator = shared.state().client_name.clone();
    let thread_json = thread.json(&model, &provider, &originator, false);
    let result = shapes::thread_start_result(
        thread_json.clone(),
        &settings_view(&thread, &model, &provider),
    );
    // Measured with 0.169 (`harness explore`): the warning comes with the thread's start,
    // after `thread/started`, whether or not a turn follows.
    let warning = super::settings::unstable_features_warning(shared, &thread);
    let mut state = shared.state();
    let mut thread = thread;
    thread.start_index = state.threads_started;
    state.threads_started += 1;
    state.threads.insert(id, thread);
    (result, thread_json, warning)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadResumeParams {
    thread_id: String,
    #[serde(default)]
    permissions: Option<String>,
    #[serde(default)]
    sandbox: Option<String>,
    #[serde(default)]
    approval_policy: Option<Value>,
    #[serde(default)]
    exclude_turns: Option<bool>,
    #[serde(default)]
    config: Option<serde_json::Map<String, Value>>,
}

pub(super) fn thread_resume(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    match resume(shared, params) {
        Ok((result, before, after)) => {
            // Resuming subscribes the client again, as it does a new client (not measured
            // after an unsubscribe).
            if let Some(id) = result["thread"]["id"].as_str() {
                shared.out.set_subscribed(id, true);
            }
            for notification in &before {
                shared.out.send(notification);
            }
            // Codex 0.169 clears the thread's goal right after the answer (measured).
            Reply::then(result, after)
        }
        Err(e) => Reply::err(e),
    }
}

/// `thread/resume`'s work: its answer, what goes before it and what after.
fn resume(
    shared: &Arc<Shared>,
    params: Option<&Value>,
) -> Result<(Value, Vec<Value>, Vec<Value>), RpcError> {
    let params: ThreadResumeParams = parse_params(params)?;
    require_initialized(shared)?;
    gate(
        shared,
        "thread/resume",
        "permissions",
        params.permissions.is_some(),
    )?;
    check_session_id(&params.thread_id)?;
    let project_docs = project_docs_wanted(params.config.as_ref())?;
    let (mut thread, was_loaded) = take_resumable(shared, &params.thread_id)?;
    let reinsert = |thread: ThreadState| {
        shared.state().threads.insert(thread.id.clone(), thread);
    };
    if params.permissions.is_some() || params.sandbox.is_some() {
        let permissions = match resolve_permissions(
            shared,
            params.permissions.as_deref(),
            params.sandbox.as_deref(),
        ) {
            Ok(p) => p,
            Err(e) => {
                reinsert(thread);
                return Err(e);
            }
        };
        match load_instructions(shared, &permissions, &thread.cwd, project_docs) {
            Ok(sources) => thread.instruction_sources = sources,
            Err(e) => {
                reinsert(thread);
                return Err(e);
            }
        }
        thread.permissions = permissions;
    }
    if let Some(policy) = params.approval_policy {
        thread.approval_policy = policy;
    }
    thread.persist();
    let with_turns = !params.exclude_turns.unwrap_or(false);
    let result = resume_result(shared, &thread, with_turns);
    let status = shapes::thread_status(&thread.id, shapes::idle_status());
    let goal_cleared = shapes::notification("thread/goal/cleared", json!({"threadId": thread.id}));
    // A resumed thread that used tokens reports its usage again, as of its last turn,
    // right after the answer (measured with 0.169).
    let usage = thread
        .turns
        .last()
        .and_then(|turn| turn["id"].as_str())
        .filter(|_| thread.tokens_used > 0)
        .map(|turn_id| {
            shapes::token_usage_updated(
                &thread.id,
                turn_id,
                thread.tokens_used / shapes::TOKENS_PER_RESPONSE,
                settings::FALLBACK_CONTEXT_WINDOW,
            )
        });
    let after: Vec<Value> = usage.into_iter().chain([goal_cleared]).collect();
    reinsert(thread);
    // The whole history's notice comes first; the thread's status only when it was loaded
    // from its rollout (measured with `harness explore`, 0.169: a second launch's resume,
    // and a resume of the thread the process holds, which sends no status).
    let notice = with_turns.then(hydration_notice);
    let status = (!was_loaded).then_some(status);
    let before: Vec<Value> = notice.into_iter().chain(status).collect();
    Ok((result, before, after))
}

/// The thread to resume, taken out of the state (or loaded from its rollout), and whether the
/// process held it already; a thread without a rollout stays and is refused.
fn take_resumable(shared: &Arc<Shared>, thread_id: &str) -> Result<(ThreadState, bool), RpcError> {
    let no_rollout = || RpcError::invalid(format!("no rollout found for thread id {thread_id}"));
    let thread = {
        let mut state = shared.state();
        match state.threads.remove(thread_id) {
            // The rollout is written when the first turn starts: a thread that never ran
            // one (and an ephemeral thread) has nothing to resume from (measured).
            Some(thread) if thread.has_rollout() => (thread, true),
            Some(thread) => {
                state.threads.insert(thread.id.clone(), thread);
                return Err(no_rollout());
            }
            None => {
                let file = super::state::thread_file(thread_id).ok_or_else(no_rollout)?;
                let loaded = ThreadState::load(&file, &shared.config).ok_or_else(no_rollout)?;
                (loaded, false)
            }
        }
    };
    Ok(thread)
}

/// `thread/resume`'s answer for `thread`, with its turns when `with_turns`.
fn resume_result(shared: &Arc<Shared>, thread: &ThreadState, with_turns: bool) -> Value {
    let (model, provider) = model_of(shared, Some(thread));
    let originator = shared.state().client_name.clone();
    let thread_json = thread.json(&model, &provider, &originator, with_turns);
    let mut result =
        shapes::thread_resume_result(thread_json, &settings_view(thread, &model, &provider));
    result["collaborationMode"] = settings::collaboration_mode(thread, &model);
    result["reasoningEffort"] = thread.model_settings.effort.clone();
    if !thread.turns.is_empty() {
        // Opaque to clients; Codex 0.169 encodes where the rollout's history begins.
        let items: usize = thread
            .turns
            .iter()
            .map(|t| t["items"].as_array().map_or(0, Vec::len))
            .sum();
        let cursor = |ordinal: usize, scope: &str| {
            json!({"requestedThreadId": thread.id, "rolloutOrdinal": ordinal, "includeAnchor": true, "scope": {"kind": scope}}).to_string()
        };
        result["turnsBackwardsCursor"] = json!(cursor(1, "turns"));
        result["itemsBackwardsCursor"] = json!(cursor(items, "itemsByCreatedAtOrdinal"));
    }
    result
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadReadParams {
    thread_id: String,
    #[serde(default)]
    include_turns: Option<bool>,
}

pub(super) fn thread_read(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let params: ThreadReadParams = parse_params(params)?;
        require_initialized(shared)?;
        check_thread_id(&params.thread_id)?;
        let state = shared.state();
        // A thread this process has not loaded is read from its rollout, as Codex 0.169 reads
        // a stored thread (status `notLoaded`; a turn a crash cut short is `interrupted`:
        // measured).
        let stored;
        let (thread, loaded) = match state.threads.get(&params.thread_id) {
            Some(thread) => (thread, true),
            None => {
                stored = super::state::thread_file(&params.thread_id)
                    .and_then(|file| ThreadState::load(&file, &shared.config))
                    .ok_or_else(|| {
                        RpcError::invalid(format!("thread not loaded: {}", params.thread_id))
                    })?;
                (&stored, false)
            }
        };
        let (model, provider) = model_of(shared, Some(thread));
        let include_turns = params.include_turns.unwrap_or(false);
        if include_turns && thread.ephemeral {
            return Err(RpcError::invalid(
                "ephemeral threads do not support includeTurns",
            ));
        }
        if include_turns && !thread.has_rollout() {
            // Codex 0.169's answer for a thread whose rollout is not written yet (measured).
            return Err(RpcError {
                code: crate::protocol::METHOD_NOT_FOUND,
                message: "list_turns is not supported yet".into(),
            });
        }
        if include_turns {
            shared.out.send(&shapes::notification(
                "deprecationNotice",
                json!({"summary": "Full-history hydration is deprecated for paginated threads; omit `includeTurns` or set it to `false`, then page with `thread/turns/list` and `thread/items/list`.", "details": null}),
            ));
        }
        let mut thread_json = thread.json(&model, &provider, &state.client_name, include_turns);
        if !loaded {
            thread_json["status"] = json!({"type": "notLoaded"});
        }
        Ok(json!({"thread": thread_json, "readState": thread.read_state()}))
    };
    match run() {
        Ok(v) => Reply::ok(v),
        Err(e) => Reply::err(e),
    }
}

/// The text of a turn's input items (what the model reads as the user's message).
pub(super) fn user_text(input: &[Value]) -> String {
    input
        .iter()
        .filter_map(|item| item.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The script the model plays once it has read `inputs` more user messages on `thread`: its
/// position in the scenario is the number of user messages it has read (less one), as the mock
/// model API in front of the real Codex counts it from the request's history. A `turn/start`
/// is one message; input steered into a running turn is one more each (Codex 0.169 sends it
/// with the model's next request, measured).
pub(super) fn script_after_inputs(
    shared: &Shared,
    thread: &mut ThreadState,
    inputs: usize,
    output_schema: bool,
) -> ScenarioTurn {
    thread.turns_started += inputs;
    let origin = TurnOrigin {
        start_index: thread.start_index,
        ephemeral: Some(thread.ephemeral),
        output_schema,
    };
    shared
        .scenario
        .turn_for(origin, thread.turns_started.saturating_sub(1))
}

/// Input steered into `thread_id`'s running turn reaches the model: the script it now plays
/// ([`script_after_inputs`]), or `None` when the thread has no running turn any more.
pub(crate) fn steered_script(
    shared: &Shared,
    thread_id: &str,
    inputs: usize,
) -> Option<ScenarioTurn> {
    let mut state = shared.state();
    let thread = state.threads.get_mut(thread_id)?;
    let output_schema = thread.active.as_ref()?.output_schema;
    Some(script_after_inputs(shared, thread, inputs, output_schema))
}

/// The `deprecationNotice` Codex 0.169 sends before answering with a thread's whole history
/// (`thread/resume`, `thread/fork` without `excludeTurns`).
pub(super) fn hydration_notice() -> Value {
    shapes::notification(
        "deprecationNotice",
        json!({"summary": "Full-history hydration is deprecated for paginated threads; use `excludeTurns: true`, then page with `thread/turns/list` and `thread/items/list`.", "details": null}),
    )
}
