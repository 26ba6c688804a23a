//! `external-sandbox-launch`: the planning launch is judged from its parsed `-c` overrides, never
//! from the argv's text, and a session that never opened is `startup-rejected`.

use crate::support::*;
use graders::events::{Body, CellId, Ending, LaunchSummary, Mode, RunStarted, SandboxFacts};
use graders::events::{PolicyGeneration, SessionStarted, Target};
use graders::verdict::VerdictKind::{self, *};
use rstest::rstest;

const PROFILE: &str = "paperclip-runner-workspace-read-only";

/// The narrow planning profile as the reference driver renders it for a cell whose folder (and
/// so CODEX_HOME) is named after the suite `external-sandbox-launch`.
const NARROW_PROFILE: &str = r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="none",":minimal"="read","/opt/codex/vendor/x86_64-unknown-linux-musl"="read","/tmp/conformance/external-sandbox-launch.runner-codex-legacy.local.planning-launch/codex/home"="none",":workspace_roots"={"."="read"}},network={enabled=false}}"#;
const DEFAULT_PROFILE: &str = r#"default_permissions="paperclip-runner-workspace-read-only""#;
const REJECTION: &str = "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";

fn c_args(overrides: &[&str]) -> Vec<String> {
    overrides
        .iter()
        .flat_map(|o| ["-c".to_string(), o.to_string()])
        .collect()
}

fn summary(mode: Mode, argv: Vec<String>, permissions: Option<&str>) -> LaunchSummary {
    LaunchSummary {
        mode,
        target: Target::ExternalSandbox,
        network_enabled: false,
        policy: PolicyGeneration::Legacy,
        argv,
        thread_permissions: permissions.map(str::to_string),
        turn_permissions: permissions.map(str::to_string),
        identity: "launch-3f9a".into(),
    }
}

fn started_with(launch: LaunchSummary) -> Body {
    Body::RunStarted(RunStarted {
        cell: CellId::new(
            "external-sandbox-launch",
            "runner-codex-legacy",
            "local",
            "planning-launch",
        ),
        driver: "reference".into(),
        launch,
        protocol: None,
    })
}

fn reported(sandbox: serde_json::Value, active: Option<&str>) -> Body {
    Body::SessionStarted(SessionStarted {
        thread_id: "thread-1".into(),
        sandbox: SandboxFacts {
            sandbox: Some(sandbox),
            active_profile: active.map(str::to_string),
            instruction_sources: vec!["/ws/AGENTS.md".into()],
        },
        approval_policy: None,
        approvals_reviewer: None,
    })
}

fn read_only_sandbox() -> serde_json::Value {
    serde_json::json!({"type": "readOnly", "networkAccess": false})
}

/// A complete planning run: launch, thread/start, the reported sandbox, one plan turn.
fn planning(argv: Vec<String>, permissions: Option<&str>, sandbox: serde_json::Value) -> Stream {
    Stream::new()
        .driver(started_with(summary(Mode::Planning, argv, permissions)))
        .driver(session_open(permissions))
        .driver(reported(sandbox, permissions.or(Some(PROFILE))))
        .driver(turn_submitted(
            0,
            permissions,
            Some("plan"),
            "Plan a refactor.",
        ))
        .harness(succeeded())
}

fn narrow(extra: &[&str]) -> Vec<String> {
    let mut overrides = vec![DEFAULT_PROFILE, NARROW_PROFILE];
    overrides.extend_from_slice(extra);
    c_args(&overrides)
}

fn with_profile(definition: &str) -> Vec<String> {
    c_args(&[DEFAULT_PROFILE, definition])
}

#[rstest]
#[case::cell_folder_path_in_profile(
    "cell-folder-path-in-profile",
    planning(narrow(&[]), Some(PROFILE), read_only_sandbox()),
    Pass
)]
#[case::sandbox_words_in_paths_and_names(
    "sandbox-words-in-paths-and-names",
    planning(
        c_args(&[
            r#"default_permissions="runner-external-sandbox-planning""#,
            r#"permissions.runner-external-sandbox-planning={filesystem={":root"="none","/srv/danger-full-access"="read","/srv/workspace-write"="none","/srv/dangerFullAccess/externalSandbox"="read",":workspace_roots"={"."="read"}},network={enabled=false}}"#,
        ]),
        Some("runner-external-sandbox-planning"),
        read_only_sandbox()
    ),
    Pass
)]
#[case::default_profile_applies(
    "default-profile-applies",
    planning(narrow(&[]), None, read_only_sandbox()),
    Pass
)]
#[case::bare_default_permissions(
    "bare-default-permissions",
    planning(
        c_args(&["default_permissions=paperclip-runner-workspace-read-only", NARROW_PROFILE]),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Pass
)]
#[case::builtin_read_only(
    "builtin-read-only",
    planning(c_args(&[r#"default_permissions=":read-only""#]), Some(":read-only"), read_only_sandbox()),
    Pass
)]
#[case::sandbox_mode_read_only(
    "sandbox-mode-read-only",
    planning(narrow(&[r#"sandbox_mode="read-only""#]), Some(PROFILE), read_only_sandbox()),
    Pass
)]
#[case::later_override_narrows(
    "later-override-narrows",
    planning(
        c_args(&[
            DEFAULT_PROFILE,
            r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="write"},network={enabled=false}}"#,
            r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read"},network={enabled=false}}"#,
        ]),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Pass
)]
#[case::workspace_roots_write(
    "workspace-roots-write",
    planning(
        with_profile(r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read",":workspace_roots"={"."="write"}},network={enabled=false}}"#),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Fail
)]
#[case::root_write(
    "root-write",
    planning(
        with_profile(r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="write"},network={enabled=false}}"#),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Fail
)]
#[case::dotted_override_widens(
    "dotted-override-widens",
    planning(
        narrow(&[r#"permissions.paperclip-runner-workspace-read-only.filesystem.:root="write""#]),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Fail
)]
#[case::builtin_workspace(
    "builtin-workspace",
    planning(narrow(&[]), Some(":workspace"), read_only_sandbox()),
    Fail
)]
#[case::default_danger_full_access(
    "default-danger-full-access",
    planning(
        c_args(&[r#"default_permissions=":danger-full-access""#]),
        None,
        read_only_sandbox()
    ),
    Fail
)]
#[case::sandbox_mode_workspace_write(
    "sandbox-mode-workspace-write",
    planning(narrow(&[r#"sandbox_mode="workspace-write""#]), Some(PROFILE), read_only_sandbox()),
    Fail
)]
#[case::network_wider_than_launch(
    "network-wider-than-launch",
    planning(
        with_profile(r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read"},network={enabled=true}}"#),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Fail
)]
#[case::reported_external_sandbox(
    "reported-external-sandbox",
    planning(
        narrow(&[]),
        Some(PROFILE),
        serde_json::json!({"type": "externalSandbox", "networkAccess": "restricted"})
    ),
    Fail
)]
#[case::reported_danger_full_access(
    "reported-danger-full-access",
    planning(narrow(&[]), Some(PROFILE), serde_json::json!({"type": "dangerFullAccess"})),
    Fail
)]
#[case::reported_unknown_sandbox(
    "reported-unknown-sandbox",
    planning(narrow(&[]), Some(PROFILE), serde_json::json!({"mode": "read-only"})),
    Incomplete
)]
#[case::stray_flag(
    "stray-flag",
    planning(
        {
            let mut argv = narrow(&[]);
            argv.push("--dangerously-bypass-approvals-and-sandbox".into());
            argv
        },
        Some(PROFILE),
        read_only_sandbox()
    ),
    Incomplete
)]
// Codex's feature flags stand for `-c features.NAME=…` (docs/events.md): readable, and they
// neither make a narrow launch unverifiable nor hide an override that widens it.
#[case::feature_flags(
    "feature-flags",
    planning(
        {
            let mut argv = narrow(&[]);
            argv.extend(["--enable", "request_permissions_tool", "--disable=shell_snapshot"].map(String::from));
            argv
        },
        Some(PROFILE),
        read_only_sandbox()
    ),
    Pass
)]
#[case::feature_flags_then_widening(
    "feature-flags-then-widening",
    planning(
        {
            let mut argv = narrow(&[]);
            argv.extend(["--enable", "request_permissions_tool", "-c", r#"sandbox_mode="workspace-write""#].map(String::from));
            argv
        },
        Some(PROFILE),
        read_only_sandbox()
    ),
    Fail
)]
#[case::dangling_config_option(
    "dangling-config-option",
    planning(
        {
            let mut argv = narrow(&[]);
            argv.push("-c".into());
            argv
        },
        Some(PROFILE),
        read_only_sandbox()
    ),
    Incomplete
)]
#[case::profile_not_toml(
    "profile-not-toml",
    planning(
        with_profile(
            r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read""#
        ),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Incomplete
)]
#[case::profile_not_defined(
    "profile-not-defined",
    planning(c_args(&[DEFAULT_PROFILE]), Some(PROFILE), read_only_sandbox()),
    Incomplete
)]
#[case::unknown_access(
    "unknown-access",
    planning(
        with_profile(r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read-write"},network={enabled=false}}"#),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Incomplete
)]
#[case::unknown_profile_key(
    "unknown-profile-key",
    planning(
        with_profile(r#"permissions.paperclip-runner-workspace-read-only={extends=":workspace",filesystem={":root"="read"}}"#),
        Some(PROFILE),
        read_only_sandbox()
    ),
    Incomplete
)]
#[case::config_profile_selected(
    "config-profile-selected",
    planning(narrow(&[r#"profile="fast""#]), Some(PROFILE), read_only_sandbox()),
    Incomplete
)]
fn planning_launch_argv(#[case] name: &str, #[case] stream: Stream, #[case] expected: VerdictKind) {
    let verdict = grade_both("external-sandbox-launch", "planning-launch", &stream);
    assert_eq!(verdict.verdict, expected, "{name}: {}", verdict.reason);
    assert!(!verdict.evidence.is_empty(), "{name}");
    insta::assert_json_snapshot!(format!("planning-launch.argv.{name}"), verdict);
}

#[test]
fn a_turn_that_selects_a_writable_profile_fails_even_when_the_launch_planned_it() {
    let mut launch = summary(Mode::Planning, narrow(&[]), Some(PROFILE));
    launch.turn_permissions = Some(":workspace".into());
    let stream = Stream::new()
        .driver(started_with(launch))
        .driver(session_open(Some(PROFILE)))
        .driver(reported(read_only_sandbox(), Some(PROFILE)))
        .driver(turn_submitted(0, Some(":workspace"), Some("plan"), "go"))
        .harness(succeeded());
    let verdict = grade_both("external-sandbox-launch", "planning-launch", &stream);
    assert_eq!(verdict.verdict, Fail, "{}", verdict.reason);
}

#[test]
fn standard_and_ask_launches_are_not_judged_read_only() {
    // The external-sandbox profile of a standard run writes by design, and its name contains
    // `external-sandbox`; neither is a planning violation.
    let argv = c_args(&[
        r#"default_permissions="paperclip-runner-external-sandbox""#,
        r#"permissions.paperclip-runner-external-sandbox={filesystem={":root"="write"},network={enabled=false}}"#,
    ]);
    let perm = Some("paperclip-runner-external-sandbox");
    for (mode, case) in [
        (Mode::Standard, "standard-launch"),
        (Mode::Ask, "ask-launch"),
    ] {
        let stream = Stream::new()
            .driver(started_with(summary(mode, argv.clone(), perm)))
            .driver(session_open(perm))
            .driver(reported(
                serde_json::json!({"type": "externalSandbox", "networkAccess": "restricted"}),
                perm,
            ))
            .driver(turn_submitted(0, perm, None, "go"))
            .harness(succeeded());
        let verdict = grade_both("external-sandbox-launch", case, &stream);
        assert_eq!(verdict.verdict, Pass, "{case}: {}", verdict.reason);
    }
}

// --- the never-opened rule

fn rejected_planning(argv: Vec<String>) -> Stream {
    Stream::new()
        .driver(started_with(summary(Mode::Planning, argv, Some(PROFILE))))
        .driver(session_open(Some(PROFILE)))
        .driver(session_rejected(REJECTION, 1))
        .harness(workspace(&[]))
        .harness(ended(
            Ending::FailedPermanently,
            true,
            Some("provider_startup_rejected"),
            Some(REJECTION),
        ))
}

#[rstest]
#[case::rejected("rejected", rejected_planning(narrow(&[])), StartupRejected)]
#[case::rejected_after_a_writable_launch(
    "rejected-after-a-writable-launch",
    rejected_planning(with_profile(
        r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="write"},network={enabled=false}}"#
    )),
    Fail
)]
#[case::silent(
    "silent",
    Stream::new()
        .driver(started_with(summary(Mode::Planning, narrow(&[]), Some(PROFILE))))
        .driver(session_open(Some(PROFILE)))
        .harness(ended(Ending::TransportLost, true, None, Some("app-server exited"))),
    Incomplete
)]
fn planning_launch_never_opened(
    #[case] name: &str,
    #[case] stream: Stream,
    #[case] expected: VerdictKind,
) {
    let verdict = grade_both("external-sandbox-launch", "planning-launch", &stream);
    assert_eq!(verdict.verdict, expected, "{name}: {}", verdict.reason);
    if expected == StartupRejected {
        assert!(verdict.reason.contains(REJECTION), "{}", verdict.reason);
    }
    insta::assert_json_snapshot!(format!("planning-launch.never-opened.{name}"), verdict);
}

fn mode_for(case: &str) -> Mode {
    match case {
        "planning-launch"
        | "plan-write-refused"
        | "plan-write-refused-no-network"
        | "escalated-write-refused"
        | "escalated-write-allowed"
        | "plan-revise-accept" => Mode::Planning,
        "ask-launch" | "ask-question" => Mode::Ask,
        _ => Mode::Standard,
    }
}

/// A run of `case` whose only thread/start was rejected (`rejection`) or got no answer.
fn never_opened(case: &str, rejection: Option<&str>) -> Stream {
    let mode = mode_for(case);
    let mut s = Stream::new()
        .driver(started_with(summary(mode, narrow(&[]), Some(PROFILE))))
        .driver(session_open(Some(PROFILE)));
    if let Some(message) = rejection {
        s = s.driver(session_rejected(message, 1));
    }
    s.harness(workspace(&[])).harness(match rejection {
        Some(_) => ended(
            Ending::FailedPermanently,
            true,
            Some("provider_startup_rejected"),
            rejection,
        ),
        None => ended(Ending::TransportLost, true, None, Some("app-server exited")),
    })
}

#[rstest]
fn every_grader_but_startup_rejection_applies_the_never_opened_rule(
    #[values(
        ("codex-planning-read-only", "plan-write-refused"),
        ("codex-planning-read-only", "plan-write-refused-no-network"),
        ("codex-planning-read-only", "escalated-write-refused"),
        ("codex-planning-read-only", "escalated-write-allowed"),
        ("core-compatibility", "message-marker"),
        ("core-compatibility", "plan-revise-accept"),
        ("core-compatibility", "ask-question"),
        ("external-sandbox-launch", "standard-launch"),
        ("external-sandbox-launch", "ask-launch"),
        ("external-sandbox-launch", "planning-launch"),
        ("transport-faults", "crash-mid-turn"),
        ("transport-faults", "hang"),
        ("transport-faults", "garbage-line"),
        ("transport-faults", "oversized-line"),
        ("launch-identity", "resume-after-profile-change")
    )]
    suite_case: (&str, &str),
) {
    let (suite, case) = suite_case;
    let verdict = grade_both(suite, case, &never_opened(case, Some(REJECTION)));
    assert_eq!(
        verdict.verdict, StartupRejected,
        "{suite}/{case}: {}",
        verdict.reason
    );
    assert!(
        verdict.reason.contains(REJECTION),
        "{suite}/{case}: {}",
        verdict.reason
    );
    assert!(
        verdict
            .evidence
            .iter()
            .any(|e| e.excerpt.contains("RTM_NEWADDR")),
        "{suite}/{case}: the provider's message is evidence"
    );
    insta::assert_json_snapshot!(format!("{case}.never-opened.rejected"), verdict);

    let silent = grade_both(suite, case, &never_opened(case, None));
    assert_eq!(
        silent.verdict, Incomplete,
        "{suite}/{case}: {}",
        silent.reason
    );
}

#[test]
fn the_rule_covers_every_case_but_startup_rejection() {
    // The list above must follow `CASES`; startup-rejection is exempt by definition, and the
    // cases graded from the wire's protocol record (the protocol profile's, and the runner
    // contract's newer suites) hold the rule in protocol_fooling.rs and runner_contract.rs.
    const WIRE_GRADED: &[&str] = &[
        "skills",
        "unsafe-workspaces",
        "app-server-environment",
        "codex-home-isolation",
        "result-idempotence",
        "resume-reconciliation",
    ];
    let covered = graders::grade::CASES
        .iter()
        .filter(|(suite, _)| {
            *suite != "startup-rejection"
                && !suite.starts_with("protocol-")
                && !WIRE_GRADED.contains(suite)
        })
        .count();
    assert_eq!(covered, 15);
    for case in ["deterministic-rejection", "transient-startup-failure"] {
        let verdict = grade_both(
            "startup-rejection",
            case,
            &never_opened(case, Some(REJECTION)),
        );
        assert_ne!(
            verdict.verdict, StartupRejected,
            "{case}: judged by its own checks"
        );
    }
}

// --- the protocol's own sandbox parameter, read from the wire

mod sandbox_parameter {
    use super::*;
    use crate::support::wire::{Run, Transcript, THREAD, THREAD_START_ID, TURN, TURN_START_ID};
    use serde_json::{json, Value};

    /// A planning run with no permission profile anywhere: `thread/start` carries `params`, the
    /// app-server answers with `reported`, and one plan turn carries `turn`.
    fn planning_run(params: Value, reported: Option<Value>, turn: Value) -> Run {
        let mut result = json!({"thread": {"id": THREAD}, "approvalPolicy": "on-request"});
        if let Some(reported) = reported {
            result["sandbox"] = reported;
        }
        let mut turn_params = json!({"threadId": THREAD, "input": [],
            "collaborationMode": {"mode": "plan"}});
        turn_params
            .as_object_mut()
            .unwrap()
            .extend(turn.as_object().unwrap().clone());
        let transcript = Transcript::new()
            .handshake()
            .request(THREAD_START_ID, "thread/start", params)
            .result(THREAD_START_ID, result)
            .request(TURN_START_ID, "turn/start", turn_params)
            .result(TURN_START_ID, json!({"turn": {"id": TURN}}))
            .finish();
        Run {
            mode: Mode::Planning,
            release: Some("0.169.0".into()),
            ..Run::new("external-sandbox-launch", "planning-launch", transcript)
        }
    }

    fn read_only() -> Option<Value> {
        Some(json!({"type": "readOnly", "networkAccess": false}))
    }

    #[test]
    fn the_read_only_sandbox_mode_reported_back_read_only_passes() {
        let verdict = planning_run(
            json!({"cwd": "/w", "sandbox": "read-only"}),
            read_only(),
            json!({}),
        )
        .grade();
        assert_eq!(verdict.verdict, Pass, "{verdict:?}");
        insta::assert_json_snapshot!("planning-launch.sandbox-mode-read-only", verdict);
    }

    #[test]
    fn no_profile_and_no_mode_passes_on_the_servers_read_only_answer() {
        let verdict = planning_run(json!({"cwd": "/w"}), read_only(), json!({})).grade();
        assert_eq!(verdict.verdict, Pass, "{verdict:?}");
        let unreported = planning_run(json!({"cwd": "/w"}), None, json!({})).grade();
        assert_eq!(
            unreported.verdict, Incomplete,
            "the answer shows nothing: {unreported:?}"
        );
        let wider = planning_run(
            json!({"cwd": "/w"}),
            Some(json!({"type": "workspaceWrite"})),
            json!({}),
        )
        .grade();
        assert_eq!(wider.verdict, Fail, "{wider:?}");
    }

    #[test]
    fn a_writable_sandbox_mode_or_policy_fails_planning_read_only() {
        let mode = planning_run(
            json!({"cwd": "/w", "sandbox": "workspace-write"}),
            read_only(),
            json!({}),
        )
        .grade();
        assert_eq!(mode.verdict, Fail, "{mode:?}");
        assert!(mode.reason.contains("workspace-write"), "{}", mode.reason);
        let policy = planning_run(
            json!({"cwd": "/w", "sandbox": "read-only"}),
            read_only(),
            json!({"sandboxPolicy": {"type": "workspaceWrite", "writableRoots": []}}),
        )
        .grade();
        assert_eq!(policy.verdict, Fail, "{policy:?}");
        assert!(policy.reason.contains("turn/start"), "{}", policy.reason);
        let network = planning_run(
            json!({"cwd": "/w", "sandbox": "read-only"}),
            read_only(),
            json!({"sandboxPolicy": {"type": "readOnly", "networkAccess": true}}),
        )
        .grade();
        assert_eq!(
            network.verdict, Fail,
            "the launch has network off: {network:?}"
        );
        let unknown = planning_run(
            json!({"cwd": "/w", "sandbox": "readonly"}),
            read_only(),
            json!({}),
        )
        .grade();
        assert_eq!(unknown.verdict, Incomplete, "{unknown:?}");
    }
}
