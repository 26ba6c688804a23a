//! The runner contract's newer cases (skills, unsafe workspaces, the app-server's environment,
//! the sealed Codex home, idempotent results, resume reconciliation): a correct driver's transcript passes each, and
//! each rule broken the way a real driver breaks it fails the check that names the rule.

use crate::support::wire::*;
use graders::events::{
    Body, Declarations, HomeEvidence, HomeFile, ModelToolCall, ModelToolOutput, OutcomeDeclaration,
    ResumeHow, Source,
};
use graders::grade::runner_contract::{HOME_CANARY_PREFIX, HOME_PROBE_MARKER};
use graders::verdict::Verdict;
use graders::verdict::VerdictKind::{self, Fail, Incomplete, Pass};
use serde_json::{json, Value};

const HOME: &str = "/cell/home/.codex";
const SKILL: &str = "/cell/home/.codex/skills/.system/imagegen/SKILL.md";
const CUT: &str = "turn-cut";
const NEXT: &str = "turn-2";

fn check(verdict: &Verdict, kind: VerdictKind, check: &str) {
    assert_eq!(verdict.verdict, kind, "{verdict:?}");
    if kind == Fail {
        assert!(
            verdict.reason.contains(&format!("`{check}`")),
            "expected check `{check}`: {}",
            verdict.reason
        );
    }
}

fn declared() -> Declarations {
    Declarations {
        outcome: Some(OutcomeDeclaration::ExitStatus),
        resume: Some(ResumeHow::Relaunch),
        dynamic_tools: true,
        ..Declarations::default()
    }
}

fn run(suite: &str, case: &str, transcript: Transcript) -> Run {
    Run::new(suite, case, transcript).declaring(declared())
}

/// `initialize` answered with the app-server's Codex home, then `initialized`.
fn handshake(t: Transcript) -> Transcript {
    t.request(
        INITIALIZE_ID,
        "initialize",
        json!({"clientInfo": {"name": "t"}}),
    )
    .result(
        INITIALIZE_ID,
        json!({"userAgent": "codex", "codexHome": HOME}),
    )
    .send(json!({"method": "initialized"}))
}

/// A thread opener with its thread configuration, answered for `THREAD` in `/w`.
fn open(t: Transcript, method: &str, config: Option<Value>, sources: Value) -> Transcript {
    let mut params = json!({"cwd": "/w", "threadId": THREAD});
    if let Some(config) = config {
        params["config"] = config;
    }
    t.request(THREAD_START_ID, method, params).result(
        THREAD_START_ID,
        json!({"thread": {"id": THREAD, "cwd": "/w"}, "sandbox": {"type": "readOnly"},
               "instructionSources": sources}),
    )
}

fn skills_config(on: bool) -> Option<Value> {
    Some(json!({"skills": {"include_instructions": on}, "project_doc_max_bytes": 0}))
}

/// A turn with these input parts, started and completed.
fn turn(t: Transcript, id: u64, turn: &str, input: Value) -> Transcript {
    t.request(
        id,
        "turn/start",
        json!({"threadId": THREAD, "input": input}),
    )
    .result(id, json!({"turn": {"id": turn}}))
    .turn_started(THREAD, turn)
    .complete_turn(THREAD, turn, "completed")
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn skill(path: &str) -> Value {
    json!({"type": "skill", "name": "imagegen", "path": path})
}

// --- skills

/// Two sessions of a task naming `$imagegen`: each turn's input and the resume's configuration
/// as given.
fn explicit(first: Value, second: Value, resume_config: Option<Value>) -> Run {
    let t = handshake(Transcript::new());
    let t = open(t, "thread/start", skills_config(true), json!([]));
    let t = turn(t, TURN_START_ID, TURN, first).close().relaunch();
    let t = open(handshake(t), "thread/resume", resume_config, json!([]));
    let t = turn(t, TURN_START_ID, NEXT, second).close();
    run("skills", "explicit-skill", t)
}

#[test]
fn explicit_skills_go_as_structured_inputs_from_the_codex_home_and_the_switch_is_forwarded() {
    let asked = || json!([text("Use $imagegen."), skill(SKILL)]);
    check(
        &explicit(asked(), asked(), skills_config(true)).grade(),
        Pass,
        "",
    );
    let text_only = json!([text("Go on with $imagegen.")]);
    check(
        &explicit(asked(), text_only, skills_config(true)).grade(),
        Fail,
        "skill-input",
    );
    let elsewhere = json!([
        text("Use $imagegen."),
        skill("/w/.agents/skills/imagegen/SKILL.md")
    ]);
    check(
        &explicit(elsewhere, asked(), skills_config(true)).grade(),
        Fail,
        "skill-path",
    );
    for resume in [None, skills_config(false)] {
        check(
            &explicit(asked(), asked(), resume).grade(),
            Fail,
            "skill-instructions-forwarded",
        );
    }
    let one_session = turn(
        open(
            handshake(Transcript::new()),
            "thread/start",
            skills_config(true),
            json!([]),
        ),
        TURN_START_ID,
        TURN,
        asked(),
    )
    .close();
    let verdict = run("skills", "explicit-skill", one_session).grade();
    assert_eq!(verdict.verdict, Incomplete, "never resumed: {verdict:?}");
}

fn skillless(config: Option<Value>, sources: Value, input: Value) -> Run {
    let t = open(
        handshake(Transcript::new()),
        "thread/start",
        config,
        sources,
    );
    run(
        "skills",
        "skillless",
        turn(t, TURN_START_ID, TURN, input).close(),
    )
}

#[test]
fn a_skillless_run_has_no_instruction_block_and_one_text_input() {
    let one = || json!([text("Summarise the README.")]);
    check(
        &skillless(skills_config(false), json!([]), one()).grade(),
        Pass,
        "",
    );
    check(
        &skillless(skills_config(false), json!(["/w/AGENTS.md"]), one()).grade(),
        Fail,
        "instruction-sources-empty",
    );
    for config in [None, skills_config(true)] {
        check(
            &skillless(config, json!([]), one()).grade(),
            Fail,
            "skill-instructions-off",
        );
    }
    check(
        &skillless(
            skills_config(false),
            json!([]),
            json!([text("Summarise."), text("Also: be skilled.")]),
        )
        .grade(),
        Fail,
        "one-text-input",
    );
}

// --- unsafe workspaces

#[test]
fn an_unsafe_workspace_is_refused_before_any_launch_as_a_failed_run() {
    let case = |t: Transcript| run("unsafe-workspaces", "workspace-root", t);
    check(&case(Transcript::nothing()).exits(1).grade(), Pass, "");
    check(
        &case(Transcript::nothing()).exits(0).grade(),
        Fail,
        "run-failed",
    );
    check(
        &case(Transcript::new().exit(0)).exits(1).grade(),
        Fail,
        "refused-before-launch",
    );
    check(
        &case(Transcript::session().finish()).exits(1).grade(),
        Fail,
        "refused-before-launch",
    );
    let undeclared = case(Transcript::nothing())
        .exits(1)
        .declaring(Declarations::default())
        .grade();
    assert_eq!(undeclared.verdict, Incomplete, "{undeclared:?}");
}

// --- the app-server's environment

#[test]
fn the_app_server_gets_only_allowlisted_names() {
    let with = |names: &[&str]| {
        let t = Transcript::nothing()
            .relaunch_with(names)
            .handshake()
            .open_thread(THREAD)
            .start_turn(TURN_START_ID, THREAD, TURN)
            .finish();
        run("app-server-environment", "allowlisted-environment", t)
    };
    let allowed = [
        "CODEX_HOME",
        "HOME",
        "LANG",
        "LC_ALL",
        "PATH",
        "PWD",
        "TMPDIR",
    ];
    check(&with(&allowed).grade(), Pass, "");
    let mut inherited = allowed.to_vec();
    inherited.extend(["HARNESS_TASK", "OPENAI_API_KEY"]);
    let verdict = with(&inherited).grade();
    check(&verdict, Fail, "environment-allowlisted");
    assert!(
        verdict.reason.contains("HARNESS_TASK, OPENAI_API_KEY"),
        "{}",
        verdict.reason
    );
    let none = run(
        "app-server-environment",
        "allowlisted-environment",
        Transcript::nothing(),
    )
    .exits(1)
    .grade();
    assert_eq!(none.verdict, Incomplete, "no launch: {none:?}");
}

// --- idempotent results

/// The model's three result calls, answered `success` as given.
fn results(answers: [bool; 3]) -> Run {
    let summaries = ["Done.", "Done.", "Something else."];
    let mut t = Transcript::session();
    let mut model = Vec::new();
    for (i, (summary, ok)) in summaries.iter().zip(answers).enumerate() {
        let id = 100 + i as u64;
        let call = format!("call_{i}");
        let arguments = json!({"status": "done", "summary": summary});
        t = t
            .recv(json!({"id": id, "method": "item/tool/call", "params": {"threadId": THREAD,
                "turnId": TURN, "callId": call, "tool": "paperclip_finish", "arguments": arguments}}))
            .answer(id, json!({"contentItems": [{"type": "inputText", "text": "ok"}], "success": ok}));
        model.push(ModelToolCall {
            call_id: call,
            name: "paperclip_finish".into(),
            arguments: arguments.to_string(),
            sandbox_permissions: None,
            justification: None,
        });
    }
    let mut run = run(
        "result-idempotence",
        "identical-retry-acknowledged",
        t.finish(),
    );
    for call in model {
        run = run.with(Source::Model, Body::ModelToolCall(call));
    }
    run
}

#[test]
fn an_identical_retry_is_acknowledged_and_a_changed_result_refused() {
    check(&results([true, true, false]).grade(), Pass, "");
    check(
        &results([false, true, false]).grade(),
        Fail,
        "first-acknowledged",
    );
    check(
        &results([true, false, false]).grade(),
        Fail,
        "identical-retry-acknowledged",
    );
    check(
        &results([true, true, true]).grade(),
        Fail,
        "conflict-refused",
    );
    let mut forged = results([true, true, false]);
    forged.extras.clear();
    let verdict = forged.grade();
    assert_eq!(
        verdict.verdict, Incomplete,
        "without what the model sent, nothing is known of the calls: {verdict:?}"
    );
}

// --- resume reconciliation

/// A session whose app-server crashes during turn `CUT`, relaunched and handshaken.
fn crashed() -> Transcript {
    let t = open(
        handshake(Transcript::new()),
        "thread/start",
        None,
        json!([]),
    );
    t.request(
        TURN_START_ID,
        "turn/start",
        json!({"threadId": THREAD, "input": [text("go")]}),
    )
    .result(TURN_START_ID, json!({"turn": {"id": CUT}}))
    .turn_started(THREAD, CUT)
    .crash()
    .relaunch()
    .handshake()
}

fn read(t: Transcript, id: u64, cwd: &str, turns: Value) -> Transcript {
    t.request(
        id,
        "thread/read",
        json!({"threadId": THREAD, "includeTurns": true}),
    )
    .result(
        id,
        json!({"thread": {"id": THREAD, "cwd": cwd, "turns": turns}}),
    )
}

fn resume(t: Transcript) -> Transcript {
    t.request(12, "thread/resume", json!({"threadId": THREAD}))
        .result(12, json!({"thread": {"id": THREAD, "cwd": "/w"}}))
}

fn cut(status: &str) -> Value {
    json!([{"id": CUT, "status": status}])
}

fn reconciled(t: Transcript) -> Run {
    run("resume-reconciliation", "reconciled-after-crash", t)
}

#[test]
fn recovery_reads_resumes_reads_again_and_only_the_saved_turn_counts() {
    let good = || resume(read(crashed(), 11, "/w", cut("interrupted")));
    let went_on = turn(
        read(good(), 13, "/w", cut("interrupted")),
        14,
        NEXT,
        json!([text("go on")]),
    )
    .close();
    check(&reconciled(went_on).grade(), Pass, "");
    // Missing, or another turn in progress: the run stops, failed.
    for turns in [
        json!([]),
        json!([{"id": CUT, "status": "interrupted"}, {"id": "turn-x", "status": "inProgress"}]),
    ] {
        let stopped = read(good(), 13, "/w", turns.clone()).close();
        check(&reconciled(stopped.clone()).exits(1).grade(), Pass, "");
        check(&reconciled(stopped).exits(0).grade(), Fail, "reconciled");
        let went_on_anyway = turn(
            read(good(), 13, "/w", turns),
            14,
            NEXT,
            json!([text("go on")]),
        )
        .close();
        check(
            &reconciled(went_on_anyway).exits(0).grade(),
            Fail,
            "reconciled",
        );
    }
    // Resumed before reading; never read again; a thread read back in another folder resumed.
    let blind = turn(
        read(resume(crashed()), 13, "/w", cut("interrupted")),
        14,
        NEXT,
        json!([text("go")]),
    )
    .close();
    check(&reconciled(blind).grade(), Fail, "read-before-resume");
    let unreconciled = turn(good(), 14, NEXT, json!([text("go on")])).close();
    check(&reconciled(unreconciled).grade(), Fail, "read-after-resume");
    let moved = turn(
        read(
            resume(read(crashed(), 11, "/elsewhere", cut("interrupted"))),
            13,
            "/w",
            cut("interrupted"),
        ),
        14,
        NEXT,
        json!([text("go on")]),
    )
    .close();
    check(&reconciled(moved).grade(), Fail, "identity-checked");
    // No crash: nothing to judge.
    let healthy = reconciled(Transcript::session().finish()).grade();
    assert_eq!(healthy.verdict, Incomplete, "{healthy:?}");
}

// --- the sealed Codex home

const PLANTED: &str = "sha256:1111";

/// The harness's record: per file, its digest after the run, whether it still holds its value
/// and whether it holds the appended marker.
fn home_record(after: [(Option<&str>, bool, bool); 3]) -> Body {
    let files = [".codex/auth.json", ".codex/config.toml", ".ssh/id_ed25519"]
        .iter()
        .zip(after)
        .map(|(path, (after, value, marker))| HomeFile {
            path: path.to_string(),
            planted: PLANTED.into(),
            after: after.map(str::to_string),
            holds_planted_value: value,
            holds_tamper_marker: marker,
        })
        .collect();
    Body::HomeEvidence(HomeEvidence {
        prefix: HOME_CANARY_PREFIX.into(),
        files,
    })
}

/// A session whose model command printed `output`, with the harness's record of the home.
fn home(output: &str, record: Option<Body>) -> Run {
    let t = Transcript::session()
        .start_turn(TURN_START_ID, THREAD, TURN)
        .finish();
    let mut run = run("codex-home-isolation", "home-secrets-sealed", t).with(
        Source::Model,
        Body::ModelToolOutput(ModelToolOutput {
            call_id: "call_1".into(),
            output: output.into(),
        }),
    );
    if let Some(record) = record {
        run = run.with(Source::Harness, record);
    }
    run
}

#[test]
fn the_codex_home_is_neither_read_nor_written_by_the_models_commands() {
    const SAME: (Option<&str>, bool, bool) = (Some(PLANTED), true, false);
    let unchanged = || Some(home_record([SAME; 3]));
    let refused = format!(
        "Output:\n{HOME_PROBE_MARKER}\ncat: /h/.codex/auth.json: No such file or directory\n"
    );
    check(&home(&refused, unchanged()).grade(), Pass, "");

    let read = format!(
        "Output:\n{HOME_PROBE_MARKER}\n{{\"OPENAI_API_KEY\": \"{HOME_CANARY_PREFIX}0f3a\"}}\n"
    );
    let verdict = home(&read, unchanged()).grade();
    check(&verdict, Fail, "codex-home-unreadable");
    assert!(
        !verdict.reason.contains("0f3a"),
        "a reason never repeats a planted value: {}",
        verdict.reason
    );

    // The app-server rewriting its own config (the real Codex adds a project's trust) is no
    // write of a command's; the command's marker, a lost value or a lost file is.
    let rewritten = (Some("sha256:2222"), true, false);
    check(
        &home(&refused, Some(home_record([SAME, rewritten, SAME]))).grade(),
        Pass,
        "",
    );
    for broken in [
        (Some("sha256:2222"), true, true),
        (Some("sha256:2222"), false, false),
        (None, false, false),
    ] {
        let verdict = home(&refused, Some(home_record([SAME, SAME, broken]))).grade();
        check(&verdict, Fail, "codex-home-untouched");
    }

    // No positive evidence: the command never ran (no computed marker: the text of the command
    // alone is not it), nothing was planted, or the record is the driver's, not the harness's.
    let not_ran = home(
        "Output:\nbwrap: loopback: Failed RTM_NEWADDR\n",
        unchanged(),
    )
    .grade();
    assert_eq!(not_ran.verdict, Incomplete, "{not_ran:?}");
    let echoed = home("echo ccf-home-probe-$((6*7))", unchanged()).grade();
    assert_eq!(echoed.verdict, Incomplete, "{echoed:?}");
    let unplanted = home(&refused, None).grade();
    assert_eq!(unplanted.verdict, Incomplete, "{unplanted:?}");
    let forged = home(&refused, None)
        .with(Source::Driver, home_record([SAME; 3]))
        .grade();
    assert_eq!(
        forged.verdict, Incomplete,
        "a driver's record is no evidence: {forged:?}"
    );
}
