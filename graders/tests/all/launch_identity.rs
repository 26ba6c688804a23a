//! `launch-identity` / `resume-after-profile-change`: a pass needs an unchanged launch identity
//! *across a change of the profile's rules* (read from the parsed argv of both launches), and
//! the saved thread resumed after the `session.relaunched`.

use crate::support::*;
use graders::events::{
    Body, CellId, Ending, LaunchSummary, Mode, PolicyGeneration, RunStarted, SessionRelaunched,
    Target,
};
use graders::verdict::VerdictKind::{self, *};
use rstest::rstest;

const PROFILE: &str = "runner-read-only";
const IDENTITY: &str = "launch-3f9a";
const DEFAULT_PROFILE: &str = r#"default_permissions="runner-read-only""#;
/// The legacy rules: restricted reads.
const LEGACY_RULES: &str = r#"permissions.runner-read-only={filesystem={":root"="none",":minimal"="read",":workspace_roots"={"."="read"}},network={enabled=false}}"#;
/// The current rules: full-disk read.
const CURRENT_RULES: &str = r#"permissions.runner-read-only={filesystem={":root"="read",":workspace_roots"={"."="read"}},network={enabled=false}}"#;

fn c_args(overrides: &[&str]) -> Vec<String> {
    overrides
        .iter()
        .flat_map(|o| ["-c".to_string(), o.to_string()])
        .collect()
}

fn legacy_argv() -> Vec<String> {
    c_args(&[DEFAULT_PROFILE, LEGACY_RULES])
}

fn current_argv() -> Vec<String> {
    c_args(&[DEFAULT_PROFILE, CURRENT_RULES])
}

fn first_launch(argv: Vec<String>, permissions: Option<&str>) -> Body {
    Body::RunStarted(RunStarted {
        cell: CellId::new(
            "launch-identity",
            "runner-fake",
            "local",
            "resume-after-profile-change",
        ),
        driver: "reference".into(),
        launch: LaunchSummary {
            mode: Mode::Planning,
            target: Target::ExternalSandbox,
            network_enabled: false,
            policy: PolicyGeneration::Legacy,
            argv,
            thread_permissions: permissions.map(str::to_string),
            turn_permissions: permissions.map(str::to_string),
            identity: IDENTITY.into(),
        },
        protocol: None,
    })
}

fn relaunched(
    identity: &str,
    argv: Vec<String>,
    permissions: Option<&str>,
    resume: Option<&str>,
) -> Body {
    Body::SessionRelaunched(SessionRelaunched {
        identity: identity.into(),
        policy: PolicyGeneration::Current,
        argv,
        thread_permissions: permissions.map(str::to_string),
        resume_thread: resume.map(str::to_string),
    })
}

/// The first launch's session on `thread-1`, up to its turn.
fn first_session(argv: Vec<String>) -> Stream {
    Stream::new()
        .driver(first_launch(argv, Some(PROFILE)))
        .driver(session_open(Some(PROFILE)))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, Some(PROFILE), Some("plan"), "Plan it."))
}

/// A whole run: a first launch under `first` argv, a relaunch, and the resumed session.
struct Case<'a> {
    first: Vec<String>,
    identity: &'a str,
    relaunch: Vec<String>,
    relaunch_permissions: Option<&'a str>,
    resume: Option<&'a str>,
    session_after: &'a str,
    ending: Ending,
}

impl Default for Case<'_> {
    fn default() -> Self {
        Self {
            first: legacy_argv(),
            identity: IDENTITY,
            relaunch: current_argv(),
            relaunch_permissions: Some(PROFILE),
            resume: Some("thread-1"),
            session_after: "thread-1",
            ending: Ending::Succeeded,
        }
    }
}

fn run(case: Case<'_>) -> Stream {
    first_session(case.first)
        .driver(relaunched(
            case.identity,
            case.relaunch,
            case.relaunch_permissions,
            case.resume,
        ))
        .harness(diagnostic("relaunched; a note for people, not graded"))
        .driver(session_open(case.relaunch_permissions))
        .driver(session_started(case.session_after))
        .driver(turn_submitted(1, Some(PROFILE), Some("plan"), "Continue."))
        .harness(ended(case.ending, false, None, None))
}

fn resumed() -> Stream {
    run(Case::default())
}

fn identity_changed() -> Stream {
    run(Case {
        identity: "launch-0000",
        ..Case::default()
    })
}

fn empty_identity() -> Stream {
    let mut s = resumed();
    if let Body::RunStarted(started) = &mut s.events[0].body {
        started.launch.identity = "  ".into();
    }
    s
}

fn rules_unchanged() -> Stream {
    run(Case {
        relaunch: legacy_argv(),
        ..Case::default()
    })
}

/// The legacy rules in another spelling: dotted overrides, other option forms, other order.
fn respelled_legacy_argv() -> Vec<String> {
    vec![
        "app-server".into(),
        r#"--config=permissions.runner-read-only.network={enabled=false}"#.into(),
        "--config".into(),
        r#"permissions.runner-read-only.filesystem={":workspace_roots"={"."="read"},":minimal"="read",":root"="none"}"#.into(),
        format!("-c{DEFAULT_PROFILE}"),
    ]
}

/// The argv text differs but the parsed profile is the same: the rules did not change.
fn rules_unchanged_other_spelling() -> Stream {
    run(Case {
        relaunch: respelled_legacy_argv(),
        ..Case::default()
    })
}

/// Only `network.enabled` differs: a rule change too.
fn network_rule_changed() -> Stream {
    run(Case {
        relaunch: c_args(&[
            DEFAULT_PROFILE,
            r#"permissions.runner-read-only={filesystem={":root"="none",":minimal"="read",":workspace_roots"={"."="read"}},network={enabled=true}}"#,
        ]),
        ..Case::default()
    })
}

/// Both launches select the same built-in profile: its rules are Codex's, unchanged.
fn same_builtin_profile() -> Stream {
    Stream::new()
        .driver(first_launch(current_argv(), Some(":read-only")))
        .driver(session_open(Some(":read-only")))
        .driver(session_started("thread-1"))
        .driver(relaunched(
            IDENTITY,
            legacy_argv(),
            Some(":read-only"),
            Some("thread-1"),
        ))
        .driver(session_open(Some(":read-only")))
        .driver(session_started("thread-1"))
        .harness(succeeded())
}

/// The relaunch selects a profile its argv does not define: its rules are not shown.
fn relaunch_profile_undefined() -> Stream {
    run(Case {
        relaunch: c_args(&[DEFAULT_PROFILE]),
        ..Case::default()
    })
}

fn relaunch_argv_unreadable() -> Stream {
    let mut argv = current_argv();
    argv.push("--sandbox".into());
    run(Case {
        relaunch: argv,
        ..Case::default()
    })
}

fn new_thread() -> Stream {
    run(Case {
        resume: None,
        session_after: "thread-2",
        ..Case::default()
    })
}

fn resumes_another_thread() -> Stream {
    run(Case {
        resume: Some("thread-9"),
        session_after: "thread-9",
        ..Case::default()
    })
}

fn resumed_session_not_started() -> Stream {
    run(Case {
        session_after: "thread-2",
        ..Case::default()
    })
}

fn no_relaunch() -> Stream {
    first_session(legacy_argv()).harness(succeeded())
}

fn run_failed() -> Stream {
    run(Case {
        ending: Ending::TransportLost,
        ..Case::default()
    })
}

#[rstest]
#[case::resumed("resumed", resumed(), Pass)]
#[case::network_rule_changed("network-rule-changed", network_rule_changed(), Pass)]
#[case::identity_changed("identity-changed", identity_changed(), Fail)]
#[case::empty_identity("empty-identity", empty_identity(), Fail)]
#[case::rules_unchanged("rules-unchanged", rules_unchanged(), Fail)]
#[case::rules_unchanged_other_spelling(
    "rules-unchanged-other-spelling",
    rules_unchanged_other_spelling(),
    Fail
)]
#[case::same_builtin_profile("same-builtin-profile", same_builtin_profile(), Fail)]
#[case::relaunch_profile_undefined(
    "relaunch-profile-undefined",
    relaunch_profile_undefined(),
    Incomplete
)]
#[case::relaunch_argv_unreadable(
    "relaunch-argv-unreadable",
    relaunch_argv_unreadable(),
    Incomplete
)]
#[case::new_thread("new-thread", new_thread(), Fail)]
#[case::resumes_another_thread("resumes-another-thread", resumes_another_thread(), Fail)]
#[case::resumed_session_not_started(
    "resumed-session-not-started",
    resumed_session_not_started(),
    Fail
)]
#[case::no_relaunch("no-relaunch", no_relaunch(), Fail)]
#[case::run_failed("run-failed", run_failed(), Fail)]
fn resume_after_profile_change(
    #[case] name: &str,
    #[case] stream: Stream,
    #[case] expected: VerdictKind,
) {
    let verdict = grade_both("launch-identity", "resume-after-profile-change", &stream);
    assert_eq!(verdict.verdict, expected, "{name}: {}", verdict.reason);
    assert!(!verdict.evidence.is_empty());
    insta::assert_json_snapshot!(format!("resume-after-profile-change.{name}"), verdict);
}

#[test]
fn unchanged_rules_fail_with_a_reason_that_says_so() {
    for stream in [
        rules_unchanged(),
        rules_unchanged_other_spelling(),
        same_builtin_profile(),
    ] {
        let verdict = grade_both("launch-identity", "resume-after-profile-change", &stream);
        assert_eq!(verdict.verdict, Fail, "{}", verdict.reason);
        assert!(
            verdict.reason.contains("did not change the rules"),
            "{}",
            verdict.reason
        );
    }
}

/// A diagnostic in the retired `launch-identity=` / `resume-thread=` text convention records
/// nothing: only `session.relaunched` does.
#[test]
fn the_retired_diagnostic_convention_is_not_read() {
    let stream = first_session(legacy_argv())
        .harness(diagnostic(&format!("launch-identity={IDENTITY} relaunch")))
        .harness(diagnostic("resume-thread=thread-1"))
        .driver(session_open(Some(PROFILE)))
        .driver(session_started("thread-1"))
        .harness(succeeded());
    let verdict = grade_both("launch-identity", "resume-after-profile-change", &stream);
    assert_eq!(verdict.verdict, Fail, "{}", verdict.reason);
    assert!(
        verdict.reason.contains("`relaunched`"),
        "{}",
        verdict.reason
    );
}

/// Every combination of what the case varies, graded; the expected verdict is computed from
/// how the stream was built, independently of the grader: a pass exactly when the identity is
/// unchanged, the profile's rules changed, the saved thread was resumed and started, and the
/// run succeeded.
#[test]
fn pass_exactly_when_identity_holds_across_a_rule_change_and_the_thread_resumes() {
    let argvs = [
        ("legacy", legacy_argv()),
        ("current", current_argv()),
        ("legacy-respelled", respelled_legacy_argv()),
    ];
    let rules = |name: &str| name.trim_end_matches("-respelled").to_string();
    let same_rules = |a: &str, b: &str| rules(a) == rules(b);
    let mut passes = 0;
    let mut graded = 0;
    for (first_name, first) in &argvs {
        for (relaunch_name, relaunch) in &argvs {
            for identity in [IDENTITY, "launch-0000"] {
                for resume in [None, Some("thread-1"), Some("thread-9")] {
                    for session_after in ["thread-1", "thread-9"] {
                        for ending in [Ending::Succeeded, Ending::TimedOut] {
                            let stream = run(Case {
                                first: first.clone(),
                                identity,
                                relaunch: relaunch.clone(),
                                relaunch_permissions: Some(PROFILE),
                                resume,
                                session_after,
                                ending,
                            });
                            let expected_pass = identity == IDENTITY
                                && !same_rules(first_name, relaunch_name)
                                && resume == Some("thread-1")
                                && session_after == "thread-1"
                                && ending == Ending::Succeeded;
                            let verdict = grade_both(
                                "launch-identity",
                                "resume-after-profile-change",
                                &stream,
                            );
                            graded += 1;
                            if expected_pass {
                                passes += 1;
                                assert_eq!(verdict.verdict, Pass, "{}", verdict.reason);
                            } else {
                                assert_eq!(
                                    verdict.verdict, Fail,
                                    "{first_name}->{relaunch_name} {identity} {resume:?} {session_after} {ending:?}: {}",
                                    verdict.reason
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(graded, 3 * 3 * 2 * 3 * 2 * 2);
    // legacy<->current in either direction, and current<->respelled legacy.
    assert_eq!(passes, 4);
}
