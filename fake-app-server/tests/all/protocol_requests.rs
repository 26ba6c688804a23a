//! The protocol cases' server requests, played against a scripted client: each request is
//! sent mid-turn bound to the live thread and turn, schema-valid for the release, and the
//! client's answer decides what happens where it has meaning.

use crate::common;

use common::cases::{decide, error, result, spawn, start_thread, Case, Schemas};
use common::Lab;
use serde_json::{json, Value};

fn no_answer() -> impl FnMut(&Value) -> Option<Value> {
    |_| None
}

fn only(messages: &[Value], method: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method)
        .cloned()
        .collect()
}

/// The one server request `method` of the run, checked bound to the case's thread and turn.
fn the_request(case: &Case, method: &str) -> Value {
    let requests: Vec<Value> = only(&case.messages(), method)
        .into_iter()
        .filter(|m| m.get("id").is_some())
        .collect();
    assert_eq!(requests.len(), 1, "{method}: {requests:#?}");
    requests[0].clone()
}

fn resolved_for(case: &Case, request: &Value) -> bool {
    case.messages().iter().any(|m| {
        m["method"] == "serverRequest/resolved"
            && m["params"]["requestId"] == request["id"]
            && m["params"]["threadId"] == json!(case.thread)
    })
}

#[test]
fn command_approval_accepted_runs_the_command_declined_does_not() {
    for (decision, written) in [("accept", true), ("decline", false)] {
        let mut case = Case::start("command-approval", "fullread", json!({}));
        let done = case.until_turn_completed(&mut decide(decision));
        assert_eq!(done["params"]["turn"]["status"], "completed");
        let request = the_request(&case, "item/commandExecution/requestApproval");
        assert_eq!(request["params"]["threadId"], json!(case.thread));
        assert_eq!(request["params"]["turnId"], json!(case.turn));
        assert!(resolved_for(&case, &request));
        assert_eq!(
            !case.probes("approval-probe-").is_empty(),
            written,
            "{decision}"
        );
        let last = case.tool_outputs().last().cloned().unwrap_or_default();
        let told = case.model_log();
        assert!(!told.is_empty(), "{last}");
        Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
    }
}

/// Under danger-full-access nothing escalates: Codex 0.169 runs the command at once and asks
/// nobody (measured).
#[test]
fn an_escalated_command_under_full_access_runs_without_asking() {
    let mut case = Case::start(
        "command-approval",
        "fullread",
        json!({"sandboxPolicy": {"type": "dangerFullAccess"}}),
    );
    let done = case.until_turn_completed(&mut |_: &Value| None);
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert!(only(&case.messages(), "item/commandExecution/requestApproval").is_empty());
    assert_eq!(case.probes("approval-probe-").len(), 1);
}

/// Under approval policy `untrusted` Codex 0.169 asks the client before every command, even
/// `echo` in the sandbox and in full access, and even with the automatic reviewer, proposing a
/// chain's first command as the amendment; under `on-request` it asks about none of them
/// (measured: corpus `untrusted-commands-*`, `untrusted-auto-review-commands`).
#[test]
fn untrusted_asks_before_every_command_and_on_request_before_none() {
    let full_access = json!({"type": "dangerFullAccess"});
    let workspace = json!({"type": "workspaceWrite"});
    for (policy, sandbox, reviewer, asked) in [
        ("untrusted", &workspace, "user", 3),
        ("untrusted", &full_access, "user", 3),
        ("untrusted", &workspace, "auto_review", 3),
        ("on-request", &workspace, "user", 0),
    ] {
        let mut case = Case::start(
            "untrusted-commands",
            "fullread",
            json!({"approvalPolicy": policy, "sandboxPolicy": sandbox, "approvalsReviewer": reviewer}),
        );
        let done = case.until_turn_completed(&mut decide("accept"));
        assert_eq!(done["params"]["turn"]["status"], "completed");
        let requests = only(&case.messages(), "item/commandExecution/requestApproval");
        assert_eq!(
            requests.len(),
            asked,
            "{policy} in {sandbox}: {requests:#?}"
        );
        let amendments: Vec<&Value> = requests
            .iter()
            .map(|r| &r["params"]["proposedExecpolicyAmendment"])
            .collect();
        if asked > 0 {
            assert_eq!(
                amendments,
                [
                    &json!(["echo", "untrusted-safe"]),
                    &json!(["sleep", "0"]),
                    &json!(["echo", "untrusted-chain"])
                ]
            );
            assert!(requests.iter().all(|r| r["params"].get("reason").is_none()));
        }
        let outputs = case.tool_outputs();
        assert!(
            outputs.iter().any(|o| o.contains("untrusted-safe")),
            "{outputs:?}"
        );
        Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
    }
}

#[test]
fn file_change_approval_accepted_writes_the_file_and_the_diff_declined_does_not() {
    let mut case = Case::start("file-change-approval", "fullread", json!({}));
    case.until_turn_completed(&mut decide("accept"));
    let request = the_request(&case, "item/fileChange/requestApproval");
    assert_eq!(request["params"]["turnId"], json!(case.turn));
    let item_id = request["params"]["itemId"].clone();
    assert!(resolved_for(&case, &request));
    let messages = case.messages();
    let completed = only(&messages, "item/completed")
        .into_iter()
        .find(|m| m["params"]["item"]["id"] == item_id)
        .expect("the fileChange item completes");
    assert_eq!(completed["params"]["item"]["status"], "completed");
    assert_eq!(
        completed["params"]["item"]["changes"][0]["kind"]["type"],
        "add"
    );
    let diff = only(&messages, "turn/diff/updated");
    assert!(!diff.is_empty());
    assert!(diff[0]["params"]["diff"]
        .as_str()
        .unwrap()
        .contains("new file mode 100644"));
    assert_eq!(case.probes("file-change-probe-").len(), 1);
    assert!(case.tool_outputs()[0]
        .contains("Success. Updated the following files:\nA file-change-probe-"));
    Schemas::of("0.169.0").assert_valid(&messages, |_| false);

    let mut declined = Case::start("file-change-approval", "fullread", json!({}));
    declined.until_turn_completed(&mut decide("decline"));
    assert!(declined.probes("file-change-probe-").is_empty());
    assert_eq!(declined.tool_outputs()[0], "patch rejected by user");
    assert!(only(&declined.messages(), "turn/diff/updated").is_empty());

    let mut cancelled = Case::start("file-change-approval", "fullread", json!({}));
    let done = cancelled.until_turn_completed(&mut decide("cancel"));
    assert_eq!(done["params"]["turn"]["status"], "interrupted");
}

/// Under `untrusted` Codex 0.169 asks before a patch even where the sandbox may write it, or
/// where there is no sandbox (measured: corpus `untrusted-file-change-*`); under `on-request`
/// a workspace-write sandbox applies it unasked.
#[test]
fn untrusted_asks_before_a_patch_the_sandbox_may_write() {
    for (policy, sandbox, asked) in [
        ("untrusted", json!({"type": "workspaceWrite"}), true),
        ("untrusted", json!({"type": "dangerFullAccess"}), true),
        ("on-request", json!({"type": "workspaceWrite"}), false),
    ] {
        let mut case = Case::start(
            "file-change-approval",
            "fullread",
            json!({"approvalPolicy": policy, "sandboxPolicy": sandbox}),
        );
        case.until_turn_completed(&mut decide("decline"));
        let requests = only(&case.messages(), "item/fileChange/requestApproval");
        assert_eq!(requests.len(), usize::from(asked), "{policy} in {sandbox}");
        assert_eq!(
            case.probes("file-change-probe-").is_empty(),
            asked,
            "{policy} in {sandbox}: a declined patch is not written, an unasked one is"
        );
    }
}

/// What the real Codex needs to offer the model `request_permissions` (off by default in 0.169).
const PERMISSIONS_TOOL: &[&str] = &["--enable", "request_permissions_tool"];

#[test]
fn permissions_approval_tells_the_model_what_was_granted() {
    let mut case = Case::start_with(
        "permissions-approval",
        "fullread",
        json!({}),
        PERMISSIONS_TOOL,
    );
    case.until_turn_completed(&mut |request: &Value| {
        result(
            request,
            json!({"permissions": {"network": {"enabled": true}}, "scope": "session"}),
        )
    });
    let request = the_request(&case, "item/permissions/requestApproval");
    assert_eq!(request["params"]["permissions"]["network"]["enabled"], true);
    assert!(resolved_for(&case, &request));
    assert_eq!(
        case.tool_outputs()[0],
        r#"{"permissions":{"network":{"enabled":true},"file_system":null},"scope":"session"}"#
    );
    Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
    // The minimal driver's `{decision}` answer grants nothing, as with the real Codex.
    let mut wrong = Case::start_with(
        "permissions-approval",
        "fullread",
        json!({}),
        PERMISSIONS_TOOL,
    );
    wrong.until_turn_completed(&mut |request: &Value| {
        result(request, json!({"decision": "decline"}))
    });
    assert_eq!(
        wrong.tool_outputs()[0],
        r#"{"permissions":{"network":null,"file_system":null},"scope":"turn"}"#
    );
}

/// Under approvalPolicy `never` Codex 0.169 asks the client nothing and grants nothing
/// (measured: the model is told no permissions).
#[test]
fn permissions_are_not_asked_under_approval_policy_never() {
    let mut case = Case::start_with(
        "permissions-approval",
        "fullread",
        json!({"approvalPolicy": "never"}),
        PERMISSIONS_TOOL,
    );
    case.until_turn_completed(&mut |_: &Value| None);
    assert!(only(&case.messages(), "item/permissions/requestApproval").is_empty());
    assert_eq!(
        case.tool_outputs()[0],
        r#"{"permissions":{"network":null,"file_system":null},"scope":"turn"}"#
    );
}

/// Under approvalPolicy `never` Codex 0.169 declines an MCP server's elicitation itself and
/// relays nothing (measured with the harness's MCP server); the turn completes.
#[test]
fn an_mcp_elicitation_is_not_relayed_under_approval_policy_never() {
    let never = json!({"approvalPolicy": "never"});
    let mut case = Case::start("mcp-elicitation", "fullread", never);
    let done = case.until_turn_completed(&mut |request: &Value| error(request));
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert!(only(&case.messages(), "mcpServer/elicitation/request").is_empty());
}

fn plan_mode() -> Value {
    json!({"collaborationMode": {"mode": "plan", "settings": {"model": "m", "reasoning_effort": null, "developer_instructions": null}}})
}

#[test]
fn user_input_is_asked_in_plan_mode_only() {
    let mut case = Case::start("user-input", "fullread", plan_mode());
    case.until_turn_completed(&mut |request: &Value| {
        result(
            request,
            json!({"answers": {"branch": {"answers": ["main (Recommended)"]}}}),
        )
    });
    let request = the_request(&case, "item/tool/requestUserInput");
    let question = &request["params"]["questions"][0];
    assert_eq!(question["id"], "branch");
    assert_eq!(question["isOther"], true);
    assert_eq!(request["params"]["isBlocking"], true);
    assert!(resolved_for(&case, &request));
    assert_eq!(
        case.tool_outputs()[0],
        r#"{"answers":{"branch":{"answers":["main (Recommended)"]}}}"#
    );
    Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
    // An error answer is empty answers; outside plan mode nobody is asked.
    let mut refused = Case::start("user-input", "fullread", plan_mode());
    refused.until_turn_completed(&mut |request: &Value| error(request));
    assert_eq!(refused.tool_outputs()[0], r#"{"answers":{}}"#);
    let mut default_mode = Case::start("user-input", "fullread", json!({}));
    default_mode.until_turn_completed(&mut no_answer());
    assert!(only(&default_mode.messages(), "item/tool/requestUserInput").is_empty());
    assert_eq!(
        default_mode.tool_outputs()[0],
        "request_user_input is unavailable in Default mode"
    );
}

#[test]
fn dynamic_tool_call_calls_the_drivers_first_tool() {
    let mut case = Case::start("dynamic-tool-call", "fullread", json!({}));
    case.until_turn_completed(&mut |request: &Value| {
        result(
            request,
            json!({"contentItems": [{"type": "inputText", "text": "ok"}], "success": true}),
        )
    });
    let request = the_request(&case, "item/tool/call");
    assert_eq!(request["params"]["tool"], "paperclip_finish");
    assert_eq!(request["params"]["turnId"], json!(case.turn));
    // No serverRequest/resolved for a tool call (observed with 0.169).
    assert!(!resolved_for(&case, &request));
    Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
}

#[test]
fn server_side_requests_are_bound_schema_valid_and_the_turn_goes_on() {
    for (name, method, thread_scoped) in [
        ("mcp-elicitation", "mcpServer/elicitation/request", true),
        (
            "auth-token-refresh",
            "account/chatgptAuthTokens/refresh",
            false,
        ),
        ("attestation", "attestation/generate", false),
        ("current-time", "currentTime/read", true),
        ("legacy-exec-command-approval", "execCommandApproval", false),
        ("legacy-apply-patch-approval", "applyPatchApproval", false),
    ] {
        let mut case = Case::start(name, "fullread", json!({}));
        let done = case.until_turn_completed(&mut |request: &Value| error(request));
        assert_eq!(done["params"]["turn"]["status"], "completed", "{name}");
        let request = the_request(&case, method);
        if thread_scoped {
            assert_eq!(request["params"]["threadId"], json!(case.thread), "{name}");
        }
        if method.ends_with("Approval") {
            assert_eq!(
                request["params"]["conversationId"],
                json!(case.thread),
                "{name}"
            );
        }
        Schemas::of("0.169.0").assert_valid(&case.messages(), |_| false);
    }
}

#[test]
fn legacy_approvals_granted_write_the_workspace_denied_do_not() {
    for name in [
        "legacy-exec-command-approval",
        "legacy-apply-patch-approval",
    ] {
        for (decision, written) in [
            (json!("approved"), true),
            (json!("denied"), false),
            (json!({"denied": {"rejection": "no"}}), false),
        ] {
            let mut case = Case::start(name, "fullread", json!({}));
            case.until_turn_completed(&mut |request: &Value| {
                result(request, json!({"decision": decision}))
            });
            assert_eq!(
                !case.probes("approval-probe-").is_empty(),
                written,
                "{name} {decision}"
            );
        }
    }
}

#[test]
fn unknown_request_is_off_schema_and_the_turn_goes_on() {
    let mut case = Case::start("unknown-request", "fullread", json!({}));
    let done = case.until_turn_completed(&mut |request: &Value| error(request));
    assert_eq!(done["params"]["turn"]["status"], "completed");
    let request = the_request(&case, "harness/unknownRequest");
    assert_eq!(request["params"]["threadId"], json!(case.thread));
    let schemas = Schemas::of("0.169.0");
    assert_eq!(
        schemas
            .violations(std::slice::from_ref(&request), |_| false)
            .len(),
        1
    );
    schemas.assert_valid(&case.messages(), |m| {
        m["method"] == "harness/unknownRequest"
    });
}

#[test]
fn safe_default_refusals_leave_no_probe_and_grants_write_it() {
    for (name, decision, written) in [
        ("command-escalation-refused", "decline", false),
        ("command-escalation-refused", "accept", true),
        ("file-change-refused", "decline", false),
        ("file-change-refused", "accept", true),
    ] {
        let mut case = Case::start(name, "fullread", json!({}));
        case.until_turn_completed(&mut decide(decision));
        assert_eq!(
            !case.probes("plan-write-probe-").is_empty(),
            written,
            "{name} {decision}"
        );
    }
}

#[test]
fn a_request_nobody_answers_is_bounded() {
    // A scenario file with a short bound: the turn goes on without the answer.
    let lab = common::Lab::new();
    let file = lab.path("s.toml");
    std::fs::write(
        &file,
        "[limits]\nclient_answer_ms = 200\n[[turns]]\nsteps = [{ step = \"message\", text = \"a\" }, { step = \"message\", text = \"b\" }]\nserver_steps = [{ step = \"request\", method = \"attestation/generate\", after_step = 0 }]\n",
    )
    .unwrap();
    let mut args = vec!["app-server", "--scenario", file.to_str().unwrap()];
    args.extend(common::profile_args());
    let mut client = common::Client::spawn(&args, &lab.home());
    client.initialize(true);
    let thread = common::cases::start_thread(&mut client, &lab, "fullread");
    client.send_request("turn/start", json!({"threadId": thread, "input": []}));
    client.server_request("attestation/generate");
    let done = client.notification("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");
}

#[test]
fn current_time_is_refused_by_a_fake_playing_0_171() {
    let lab = common::Lab::new();
    let mut client = common::Client::spawn(
        &[
            "app-server",
            "--scenario",
            "builtin:current-time",
            "--codex-version",
            "0.171.0",
        ],
        &lab.home(),
    );
    let status = client.wait_exit(common::WAIT).expect("exits");
    assert_eq!(status.code(), Some(1));
    let stderr = client.stderr_text();
    assert!(
        stderr.contains("`currentTime/read` is not a request Codex 0.171.0 sends"),
        "{stderr}"
    );
}

/// Without the feature Codex 0.169 does not offer the tool: the model's call is refused and the
/// client is asked nothing (measured).
#[test]
fn request_permissions_is_not_offered_without_its_feature() {
    let mut case = Case::start("permissions-approval", "fullread", json!({}));
    case.until_turn_completed(&mut |_: &Value| None);
    assert!(only(&case.messages(), "item/permissions/requestApproval").is_empty());
    assert_eq!(
        case.tool_outputs()[0],
        "unsupported call: request_permissions"
    );
}

#[test]
fn features_under_development_are_warned_about_as_a_thread_starts() {
    // Codex 0.169 (measured, `harness explore`): once per thread, as it starts (after
    // `thread/started`), a turn or none; the features sorted; `-c features.X=true` and
    // `--enable X` alike; a stable feature is quiet. The fake warned on the first turn only.
    let (mut client, _, lab) = spawn(
        "healthy",
        Lab::new(),
        &[
            "--enable",
            "request_permissions_tool",
            "-c",
            "features.exec_permission_approvals=true",
            "--enable",
            "goals",
        ],
    );
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, "fullread");
    client.wait_for("warning", |m| m["method"] == "warning");
    for _ in 0..2 {
        client.send_request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "Go."}]}),
        );
        client.wait_for("turn/completed", |m| m["method"] == "turn/completed");
    }
    let messages = common::cases::messages(&client);
    let warnings: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "warning")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let config = lab.home().join("config.toml");
    assert_eq!(
        warnings[0]["params"],
        json!({"threadId": thread, "message": format!("Under-development features enabled: exec_permission_approvals, request_permissions_tool. Under-development features are incomplete and may behave unpredictably. To suppress this warning, set `suppress_unstable_features_warning = true` in {}.", config.display())})
    );
    let position = |wanted: &dyn Fn(&Value) -> bool| messages.iter().position(wanted).unwrap();
    let started = position(&|m| m["method"] == "thread/started");
    let warned = position(&|m| m["method"] == "warning");
    let turn_answered = position(&|m| m["result"]["turn"]["id"].is_string());
    assert!(started < warned, "the warning follows thread/started");
    assert!(warned < turn_answered, "the warning comes before any turn");
}

/// A permissions request an interrupt left pending is resolved in the same write as the
/// interrupted turn's `turn/completed`: a client that starts its next turn (plan mode, so the
/// thread's settings change) as soon as it reads that has Codex 0.169's order,
/// `serverRequest/resolved` before `thread/settings/updated` (found by `harness explore`, the
/// corpus's `permissions-late-then-plan-mode`: the fake resolved it after the next turn/start's
/// answer).
#[test]
fn a_request_an_interrupt_left_pending_resolves_before_the_next_turns_settings() {
    let mut case = Case::start_with(
        "permissions-approval",
        "fullread",
        json!({}),
        PERMISSIONS_TOOL,
    );
    let interrupt = |request: &Value| {
        (request["method"] == "item/permissions/requestApproval").then(|| {
            json!({"id": 9000, "method": "turn/interrupt", "params": {
                "threadId": request["params"]["threadId"], "turnId": request["params"]["turnId"]}})
        })
    };
    case.until_turn_completed(&mut { interrupt });
    let first_turn = case.turn.clone();
    // The explorer's late answer: the accepting one, once the turn ended, then the next turn.
    let request = the_request(&case, "item/permissions/requestApproval");
    case.client
        .send(&json!({"id": request["id"], "result": {"permissions": {}, "scope": "turn"}}));
    case.client.send_request(
        "turn/start",
        json!({"threadId": case.thread, "input": [{"type": "text", "text": "again"}],
            "collaborationMode": {"mode": "plan", "settings": {"model": "gpt-5.5"}}}),
    );
    case.pump("the next turn", &mut no_answer(), |_, m| {
        m["method"] == "turn/started" && m["params"]["turn"]["id"] != json!(first_turn)
    });
    let messages = case.messages();
    assert!(messages.iter().any(|m| m["id"] == 9000), "{messages:#?}");
    let order: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .filter(|m| *m == "serverRequest/resolved" || *m == "thread/settings/updated")
        .collect();
    assert_eq!(order, ["serverRequest/resolved", "thread/settings/updated"]);
}
