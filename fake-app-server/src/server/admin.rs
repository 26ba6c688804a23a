//! What a client does to threads besides running turns in them, answered like Codex 0.169
//! (measured with the real binary, offline): list them (`thread/list`, `thread/loaded/list`),
//! page their history (`thread/turns/list`, `thread/items/list`), name, fork, archive,
//! unarchive, delete and unsubscribe them, and ask for their goal and background terminals
//! (the fake's model never sets a goal nor leaves a terminal running).

use super::gate::{check_session_id, check_thread_id, require_initialized};
use super::settings::model_of;
use super::state::{self, State, ThreadState};
use super::{Reply, Shared};
use crate::protocol::shapes;
use crate::protocol::{parse_params, RpcError, METHOD_NOT_FOUND};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadIdParams {
    thread_id: String,
}

/// The params' thread id, after the handshake and Codex's id check.
fn thread_id_of(shared: &Shared, params: Option<&Value>) -> Result<String, RpcError> {
    let params: ThreadIdParams = parse_params(params)?;
    require_initialized(shared)?;
    check_thread_id(&params.thread_id)?;
    Ok(params.thread_id)
}

/// `params` as `P` for a method on a thread, and the thread's id (checked as [`thread_id_of`]).
fn thread_params<P: serde::de::DeserializeOwned>(
    shared: &Shared,
    params: Option<&Value>,
) -> Result<(String, P), RpcError> {
    let parsed: P = parse_params(params)?;
    Ok((thread_id_of(shared, params)?, parsed))
}

fn no_rollout(thread_id: &str) -> RpcError {
    RpcError::invalid(format!("no rollout found for thread id {thread_id}"))
}

fn loaded<'a>(state: &'a State, thread_id: &str) -> Result<&'a ThreadState, RpcError> {
    state
        .threads
        .get(thread_id)
        .ok_or_else(|| super::gate::thread_not_found(thread_id))
}

/// A thread as `thread/list` and `thread/unarchive` show it: a loaded one as it stands, one
/// read from its file not loaded (no environments, status `notLoaded`).
fn listed(shared: &Shared, state: &State, thread: &ThreadState, loaded: bool) -> Value {
    let (model, provider) = model_of(shared, Some(thread));
    let mut view = thread.json(&model, &provider, &state.client_name, false);
    view["canAcceptDirectInput"] = Value::Null;
    if !loaded {
        view["status"] = json!({"type": "notLoaded"});
        view["environments"] = Value::Null;
    }
    view
}

/// `thread/loaded/list`: the loaded threads' ids, in the order they were started or resumed.
pub(super) fn thread_loaded_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let _: serde_json::Map<String, Value> = parse_params(params)?;
        require_initialized(shared)?;
        let state = shared.state();
        let mut threads: Vec<&ThreadState> = state.threads.values().collect();
        threads.sort_by_key(|t| (t.created_at, t.start_index));
        let ids: Vec<&str> = threads.iter().map(|t| t.id.as_str()).collect();
        Ok(json!({"data": ids, "nextCursor": null}))
    };
    Reply::from(run())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ThreadListParams {
    #[serde(default)]
    archived: Option<bool>,
    #[serde(default)]
    cwd: Option<Value>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    include_attached_threads: Option<bool>,
    #[serde(default)]
    search_term: Option<String>,
}

/// `thread/list`: the threads that have a rollout (archived ones with `archived: true`), newest
/// first, with their read states. A cursor is the id of the last thread of the page before.
pub(super) fn thread_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let params: ThreadListParams = parse_params(params)?;
        require_initialized(shared)?;
        // Attached threads are listed only by a search (measured with `harness explore`,
        // 0.169: `includeAttachedThreads: true` without a `searchTerm` is refused).
        if params.include_attached_threads == Some(true)
            && params.search_term.as_deref().is_none_or(str::is_empty)
        {
            return Err(RpcError::invalid(
                "includeAttachedThreads requires a non-empty searchTerm",
            ));
        }
        let archived = params.archived.unwrap_or(false);
        let cwds: Option<Vec<String>> = match &params.cwd {
            None | Some(Value::Null) => None,
            Some(Value::String(one)) => Some(vec![one.clone()]),
            Some(many) => Some(
                serde_json::from_value(many.clone())
                    .map_err(|e| RpcError::invalid(format!("Invalid request: cwd: {e}")))?,
            ),
        };
        let state = shared.state();
        let mut entries: Vec<(ThreadState, bool)> = Vec::new();
        for file in state::thread_files(archived) {
            let Some(thread) = ThreadState::load(&file, &shared.config) else {
                continue;
            };
            match state.threads.get(&thread.id).filter(|_| !archived) {
                Some(live) => entries.push((clone_thread(live), true)),
                None => entries.push((thread, false)),
            }
        }
        entries.retain(|(t, _)| {
            cwds.as_ref()
                .is_none_or(|cwds| cwds.iter().any(|c| t.cwd == std::path::Path::new(c)))
        });
        entries.sort_by_key(|(t, _)| std::cmp::Reverse((t.created_at, t.id.clone())));
        if let Some(after) = &params.cursor {
            if let Some(at) = entries.iter().position(|(t, _)| &t.id == after) {
                entries.drain(..=at);
            }
        }
        let limit = params.limit.unwrap_or(usize::MAX).max(1);
        let next_cursor = (entries.len() > limit).then(|| entries[limit - 1].0.id.clone());
        entries.truncate(limit);
        let mut read_states = serde_json::Map::new();
        for (thread, _) in &entries {
            read_states.insert(thread.id.clone(), thread.read_state());
        }
        let backwards = entries.first().map(|(t, _)| {
            chrono::DateTime::from_timestamp(t.created_at as i64, 0)
                .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        });
        let data: Vec<Value> = entries
            .iter()
            .map(|(thread, loaded)| listed(shared, &state, thread, *loaded))
            .collect();
        Ok(
            json!({"data": data, "readStates": read_states, "nextCursor": next_cursor, "backwardsCursor": backwards.flatten()}),
        )
    };
    Reply::from(run())
}

/// A loaded thread's persisted form read back (the list shows what the file and the loaded
/// state agree on; the turn's signals stay with the loaded one).
fn clone_thread(thread: &ThreadState) -> ThreadState {
    ThreadState {
        id: thread.id.clone(),
        cwd: thread.cwd.clone(),
        ephemeral: thread.ephemeral,
        start_index: thread.start_index,
        path: thread.path.clone(),
        permissions: thread.permissions.clone(),
        approval_policy: thread.approval_policy.clone(),
        approvals_reviewer: thread.approvals_reviewer.clone(),
        model: thread.model.clone(),
        collaboration_mode: thread.collaboration_mode.clone(),
        model_settings: thread.model_settings.clone(),
        history: thread.history.clone(),
        name: thread.name.clone(),
        forked_from: thread.forked_from.clone(),
        dynamic_tools: thread.dynamic_tools.clone(),
        raw_events: false,
        features: thread.features.clone(),
        instruction_sources: thread.instruction_sources.clone(),
        preview: thread.preview.clone(),
        tokens_used: thread.tokens_used,
        created_at: thread.created_at,
        updated_at: thread.updated_at,
        turns: thread.turns.clone(),
        turns_started: thread.turns_started,
        active: None,
    }
}

/// A page cursor as Codex 0.169 writes them (opaque to clients).
fn cursor(thread_id: &str, ordinal: usize, include_anchor: bool, scope: &str) -> String {
    json!({"requestedThreadId": thread_id, "rolloutOrdinal": ordinal, "includeAnchor": include_anchor, "scope": {"kind": scope}}).to_string()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageParams {
    #[serde(default)]
    limit: Option<usize>,
}

/// The loaded thread `thread_id` (or, not loaded, its rollout) for a history page.
fn history(shared: &Shared, thread_id: &str) -> Result<ThreadState, RpcError> {
    let state = shared.state();
    if let Some(thread) = state.threads.get(thread_id) {
        return Ok(clone_thread(thread));
    }
    let file = state::thread_file(thread_id).ok_or_else(|| no_rollout(thread_id))?;
    ThreadState::load(&file, &shared.config).ok_or_else(|| no_rollout(thread_id))
}

/// `thread/turns/list`: the finished turns, newest first, each with its user messages and its
/// final agent message (`itemsView: summary`).
pub(super) fn thread_turns_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let (id, params): (_, PageParams) = thread_params(shared, params)?;
        let thread = history(shared, &id)?;
        if !thread.has_rollout() {
            return Err(RpcError::invalid(format!(
                "thread {} is not materialized yet; thread/turns/list is unavailable before first user message",
                thread.id
            )));
        }
        let mut turns: Vec<Value> = thread.turns.iter().rev().map(summary_turn).collect();
        let limit = params.limit.unwrap_or(usize::MAX).max(1);
        let next =
            (turns.len() > limit).then(|| cursor(&thread.id, turns.len() - limit, false, "turns"));
        turns.truncate(limit);
        Ok(
            json!({"data": turns, "nextCursor": next, "backwardsCursor": cursor(&thread.id, 1, true, "turns")}),
        )
    };
    Reply::from(run())
}

/// A finished turn's summary view: its user messages and its last agent message.
fn summary_turn(turn: &Value) -> Value {
    let items = turn["items"].as_array().cloned().unwrap_or_default();
    let last_message = items
        .iter()
        .rposition(|item| item["type"] == "agentMessage");
    let kept: Vec<Value> = items
        .into_iter()
        .enumerate()
        .filter(|(index, item)| item["type"] == "userMessage" || Some(*index) == last_message)
        .map(|(_, item)| item)
        .collect();
    let mut turn = turn.clone();
    turn["items"] = json!(kept);
    turn["itemsView"] = json!("summary");
    turn
}

/// `thread/items/list`: every item of the finished turns, oldest first, with its turn.
pub(super) fn thread_items_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let (id, params): (_, PageParams) = thread_params(shared, params)?;
        let thread = history(shared, &id)?;
        if !thread.has_rollout() {
            return Err(RpcError {
                code: METHOD_NOT_FOUND,
                message: "thread/items/list is not supported yet".into(),
            });
        }
        let mut items: Vec<Value> = thread
            .turns
            .iter()
            .flat_map(|turn| {
                let turn_id = turn["id"].clone();
                turn["items"].as_array().cloned().unwrap_or_default().into_iter().map(move |item| {
                    json!({"turnId": turn_id, "startedAtMs": item["startedAtMs"], "completedAtMs": item["completedAtMs"], "item": item})
                })
            })
            .collect();
        let total = items.len();
        let limit = params.limit.unwrap_or(usize::MAX).max(1);
        let next =
            (total > limit).then(|| cursor(&thread.id, limit, false, "itemsByCreatedAtOrdinal"));
        items.truncate(limit);
        Ok(json!({"data": items, "nextCursor": next,
            "backwardsCursor": cursor(&thread.id, total, true, "itemsByCreatedAtOrdinal")}))
    };
    Reply::from(run())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NameParams {
    thread_id: String,
    name: String,
}

/// `thread/name/set`: `{}`, then `thread/name/updated`; also for a thread that only has a
/// rollout (not loaded), which keeps the name.
pub(super) fn thread_name_set(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let (_, params): (_, NameParams) = thread_params(shared, params)?;
        let mut state = shared.state();
        match state.threads.get_mut(&params.thread_id) {
            Some(thread) => {
                thread.name = Some(params.name.clone());
                thread.persist();
            }
            None => {
                let file = state::thread_file(&params.thread_id)
                    .ok_or_else(|| no_rollout(&params.thread_id))?;
                let mut thread = ThreadState::load(&file, &shared.config)
                    .ok_or_else(|| no_rollout(&params.thread_id))?;
                thread.name = Some(params.name.clone());
                thread.persist();
            }
        }
        Ok(shapes::notification(
            "thread/name/updated",
            json!({"threadId": params.thread_id, "threadName": params.name}),
        ))
    };
    match run() {
        Ok(updated) => Reply::then(json!({}), vec![updated]),
        Err(e) => Reply::err(e),
    }
}

/// `thread/goal/get`: the fake's model never sets a goal.
pub(super) fn thread_goal_get(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    Reply::from(thread_id_of(shared, params).and_then(|id| {
        loaded(&shared.state(), &id)?;
        Ok(json!({"goal": null}))
    }))
}

/// `thread/goal/clear`: nothing to clear (no goal is ever set).
pub(super) fn thread_goal_clear(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    Reply::from(thread_id_of(shared, params).and_then(|id| {
        loaded(&shared.state(), &id)?;
        Ok(json!({"cleared": false}))
    }))
}

/// `thread/backgroundTerminals/list`: the fake's commands never outlive their step.
pub(super) fn background_terminals_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    Reply::from(thread_id_of(shared, params).and_then(|id| {
        loaded(&shared.state(), &id)?;
        Ok(json!({"data": [], "nextCursor": null}))
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TerminateParams {
    #[allow(dead_code)]
    process_id: String,
}

/// `thread/backgroundTerminals/terminate`: there is never one to terminate.
pub(super) fn background_terminals_terminate(
    shared: &Arc<Shared>,
    params: Option<&Value>,
) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let (id, _): (_, TerminateParams) = thread_params(shared, params)?;
        loaded(&shared.state(), &id)?;
        Ok(json!({"terminated": false}))
    };
    Reply::from(run())
}

/// `thread/unsubscribe`: `unsubscribed` for a loaded thread, `notLoaded` otherwise (the thread
/// stays loaded, as Codex 0.169 still lists it; its notifications stop, `Output::unsubscribed`).
pub(super) fn thread_unsubscribe(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    Reply::from(thread_id_of(shared, params).map(|id| {
        let status = if shared.state().threads.contains_key(&id) {
            shared.out.set_subscribed(&id, false);
            "unsubscribed"
        } else {
            "notLoaded"
        };
        json!({"status": status})
    }))
}

/// Unload `thread_id` (archive, delete): the thread, if it was loaded, and its file, if any.
/// Not loaded, its rollout must exist.
fn unload(
    shared: &Shared,
    thread_id: &str,
) -> Result<(Option<ThreadState>, Option<PathBuf>), RpcError> {
    let mut state = shared.state();
    match state.threads.remove(thread_id) {
        Some(thread) => {
            let file = thread.path.clone().filter(|p| p.is_file());
            Ok((Some(thread), file))
        }
        None => state::thread_file(thread_id)
            .map(|file| (None, Some(file)))
            .ok_or_else(|| no_rollout(thread_id)),
    }
}

/// `thread/status/changed` to `notLoaded` before the answer, `NOTIFICATION` after it.
fn unloaded_reply(thread_id: &str, notification: &str) -> Reply {
    Reply::then(
        json!({}),
        vec![shapes::notification(
            notification,
            json!({"threadId": thread_id}),
        )],
    )
    .before(shapes::thread_status(
        thread_id,
        json!({"type": "notLoaded"}),
    ))
}

/// `thread/archive`: the thread is unloaded and its rollout moves to
/// `$CODEX_HOME/archived_sessions/`.
pub(super) fn thread_archive(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<String, RpcError> {
        let params: ThreadIdParams = parse_params(params)?;
        require_initialized(shared)?;
        // Codex 0.169 words a malformed id here as a session id (measured with `harness
        // explore`, corpus `thread-archive-session-id`), as `thread/resume` does.
        check_session_id(&params.thread_id)?;
        let id = params.thread_id;
        let (thread, file) = unload(shared, &id)?;
        let Some(dir) = state::archive_dir() else {
            return Ok(id);
        };
        let failed = |e: std::io::Error| RpcError::internal(format!("archiving {id}: {e}"));
        std::fs::create_dir_all(&dir).map_err(failed)?;
        match (file, thread) {
            (Some(file), _) => {
                std::fs::rename(&file, dir.join(file.file_name().unwrap_or_default()))
                    .map_err(failed)?;
            }
            // A thread that never ran a turn has no rollout; Codex still knows it as archived.
            (None, Some(mut thread)) => {
                let name = state::new_thread_file(&id)
                    .and_then(|p| p.file_name().map(|n| n.to_owned()))
                    .unwrap_or_default();
                thread.path = Some(dir.join(name));
                thread.write_record();
            }
            (None, None) => {}
        }
        Ok(id)
    };
    match run() {
        Ok(id) => unloaded_reply(&id, "thread/archived"),
        Err(e) => Reply::err(e),
    }
}

/// `thread/delete`: the thread is unloaded and its rollout removed.
pub(super) fn thread_delete(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<String, RpcError> {
        let id = thread_id_of(shared, params)?;
        if let (_, Some(file)) = unload(shared, &id)? {
            std::fs::remove_file(&file)
                .map_err(|e| RpcError::internal(format!("deleting {}: {e}", file.display())))?;
        }
        Ok(id)
    };
    match run() {
        Ok(id) => unloaded_reply(&id, "thread/deleted"),
        Err(e) => Reply::err(e),
    }
}

/// `thread/unarchive`: the rollout moves back below `sessions/`; the thread is answered as
/// listed, not loaded; then `thread/unarchived`.
pub(super) fn thread_unarchive(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<(String, Value), RpcError> {
        let id = thread_id_of(shared, params)?;
        if shared.state().threads.contains_key(&id) {
            return Err(RpcError::invalid(format!(
                "thread {id} already has an active writer"
            )));
        }
        let archived = state::thread_file_in(&id, true).ok_or_else(|| no_rollout(&id))?;
        let mut thread =
            ThreadState::load(&archived, &shared.config).ok_or_else(|| no_rollout(&id))?;
        let name = archived.file_name().unwrap_or_default().to_owned();
        // `rollout-YYYY-MM-DDTHH-MM-SS-<id>.jsonl`: back into that day's folder.
        let day = name
            .to_str()
            .and_then(|n| n.get(8..18))
            .unwrap_or_default()
            .replace('-', "/");
        let target = state::sessions_dir()
            .ok_or_else(|| RpcError::internal("CODEX_HOME is not set"))?
            .join(day)
            .join(&name);
        let moved = target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::rename(&archived, &target));
        moved
            .map_err(|e| RpcError::internal(format!("unarchiving {}: {e}", archived.display())))?;
        thread.path = Some(target);
        thread.updated_at = shapes::now_s();
        thread.persist();
        let state = shared.state();
        Ok((
            id,
            json!({"thread": listed(shared, &state, &thread, false)}),
        ))
    };
    match run() {
        Ok((id, result)) => Reply::then(
            result,
            vec![shapes::notification(
                "thread/unarchived",
                json!({"threadId": id}),
            )],
        ),
        Err(e) => Reply::err(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForkParams {
    #[serde(default)]
    exclude_turns: Option<bool>,
}

/// `thread/fork`: a new thread holding a copy of the source's history (`forkedFromId`), answered
/// like `thread/start`, then `thread/started`. The model of the fork has read what the source's
/// model read, so the fork's next turn plays the script after the source's.
pub(super) fn thread_fork(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<(Value, Value, bool), RpcError> {
        let (id, params): (_, ForkParams) = thread_params(shared, params)?;
        let id = &id;
        let loaded_source = shared.state().threads.contains_key(id);
        if !loaded_source && state::thread_file_in(id, true).is_some() {
            return Err(RpcError::invalid(format!(
                "session {id} is archived. Run `codex unarchive {id}` to unarchive it first."
            )));
        }
        let source = history(shared, id)?;
        if !source.has_rollout() {
            return Err(no_rollout(id));
        }
        let fork_id = crate::ids::uuid_v7();
        let now = shapes::now_s();
        let mut fork = ThreadState {
            id: fork_id.clone(),
            path: state::new_thread_file(&fork_id),
            forked_from: Some(source.id.clone()),
            created_at: now,
            updated_at: now,
            ..clone_thread(&source)
        };
        let with_turns = !params.exclude_turns.unwrap_or(false);
        let mut state = shared.state();
        fork.start_index = state.threads_started;
        state.threads_started += 1;
        fork.persist();
        let (model, provider) = model_of(shared, Some(&fork));
        let thread_json = fork.json(&model, &provider, &state.client_name, with_turns);
        let result = shapes::thread_start_result(
            thread_json.clone(),
            &super::threads::settings_view(&fork, &model, &provider),
        );
        state.threads.insert(fork_id, fork);
        Ok((result, thread_json, with_turns))
    };
    match run() {
        Ok((result, mut thread_json, with_turns)) => {
            thread_json["turns"] = json!([]);
            let reply = Reply::then(
                result,
                vec![shapes::notification(
                    "thread/started",
                    json!({"thread": thread_json}),
                )],
            );
            if with_turns {
                reply.before(super::threads::hydration_notice())
            } else {
                reply
            }
        }
        Err(e) => Reply::err(e),
    }
}
