use super::normalise::{
    normalise_arg0_alias, normalise_canary_values, normalise_panic_thread_id, order_output_lines,
    recut,
};
use super::*;
use codex::mock_api::probe_id_for;
use graders::events::{Body, Event, Source};

/// The published drivers' cells pair `NAME-fake` with each `NAME-codex*` runner, case by
/// case; a case a driver cannot express is no pair.
#[test]
fn declared_drivers_are_paired_with_their_fake_runner() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../drivers/published.toml");
    let matrix = matrix::load::load_matrix(Some(&file), &[], None).unwrap();
    let names: Vec<String> = pairs(&matrix, &[]).iter().map(Pair::name).collect();
    for expected in [
        "codex-planning-read-only.python-sdk-fake~python-sdk-codex.daytona.escalated-write-auto-review-allow",
        "codex-planning-read-only.codex-acp-fake~codex-acp-codex-0-160-0.local.plan-write-refused",
        "core-compatibility.codex-acp-fake~codex-acp-codex.daytona.message-marker-daytona",
        "codex-planning-read-only.runner-fake~runner-codex.local.plan-write-refused",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:#?}");
    }
    for absent in [
        "python-sdk-fake~python-sdk-codex.local.escalated-write-user-decline",
        "codex-acp-fake~codex-acp-codex.local.escalated-write-never",
        "python-sdk-fake~codex-acp-codex",
    ] {
        assert!(!names.iter().any(|n| n.contains(absent)), "{absent}");
    }
}
use graders::events::{
    Diagnostic, Item, ItemEvent, Level, SandboxFacts, SessionStarted, TurnStarted,
};

fn ev(seq: u64, source: Source, body: Body) -> Event {
    Event::new(seq, "r", source, body)
}

fn run(thread: &str, turn: &str, root: &str, noise: bool) -> Vec<Event> {
    let probe = probe_id_for(thread);
    let mut events = vec![
        ev(
            0,
            Source::Driver,
            Body::SessionStarted(SessionStarted {
                thread_id: thread.into(),
                sandbox: SandboxFacts {
                    instruction_sources: vec![format!("{root}/workspace/AGENTS.md")],
                    ..Default::default()
                },
                approval_policy: None,
                approvals_reviewer: None,
            }),
        ),
        ev(
            1,
            Source::Driver,
            Body::TurnStarted(TurnStarted {
                turn_id: turn.into(),
            }),
        ),
        ev(
            2,
            Source::Driver,
            Body::ItemCompleted(ItemEvent {
                turn_id: Some(turn.into()),
                item: Item::AgentMessage {
                    id: format!("msg-{turn}"),
                    text: format!("wrote plan-write-probe-{probe}.txt"),
                },
            }),
        ),
    ];
    if noise {
        events.push(ev(
            3,
            Source::Driver,
            Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: "stderr noise".into(),
            }),
        ));
    }
    events
}

#[test]
fn ids_paths_and_probe_ids_normalise_away_and_diagnostics_are_not_compared() {
    let fake = normalise(
        &run("t-fake", "u-fake", "/x/fake-cell", false),
        "/x/fake-cell",
    );
    let real = normalise(
        &run("t-real", "u-real", "/y/real-cell", true),
        "/y/real-cell",
    );
    assert_eq!(first_divergence(&fake, &real), None);
    assert_eq!(fake[1]["payload"]["turn_id"], "<id-2>");
    assert_eq!(
        fake[2]["payload"]["item"]["text"],
        "wrote plan-write-probe-<probe>.txt"
    );
    assert_eq!(
        fake[0]["payload"]["sandbox"]["instruction_sources"][0],
        "<cell>/workspace/AGENTS.md"
    );
}

#[test]
fn command_output_lines_compare_in_any_order_but_must_all_match() {
    let mut a = serde_json::json!("x: Read-only file system\nWRITE_REFUSED\n");
    let mut b = serde_json::json!("WRITE_REFUSED\nx: Read-only file system\n");
    let mut c = serde_json::json!("WRITE_REFUSED\n");
    for v in [&mut a, &mut b, &mut c] {
        order_output_lines(v);
    }
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a, "WRITE_REFUSED\nx: Read-only file system\n");
}

#[test]
fn codex_helper_alias_folders_normalise() {
    assert_eq!(
        normalise_arg0_alias("execvp /h/tmp/arg0-linux/codex-arg0yQYnsD/codex-linux-sandbox"),
        "execvp /h/tmp/arg0-linux/codex-arg0<random>/codex-linux-sandbox"
    );
}

#[test]
fn planted_canary_values_normalise_and_nothing_else_does() {
    assert_eq!(
        normalise_canary_values(
            "token = ccf-home-canary-8bed2492485344ad99b6f12f4ccffb99 K=ccf-canary-0123456789abcdef0123456789abcdef ccf-canary-short"
        ),
        "token = ccf-home-canary-<random> K=ccf-canary-<random> ccf-canary-short"
    );
}

#[test]
fn a_panics_thread_id_normalises_and_nothing_else_does() {
    assert_eq!(
        normalise_panic_thread_id("thread 'main' (92) panicked; thread 'main' (x) too"),
        "thread 'main' (<tid>) panicked; thread 'main' (x) too"
    );
}

#[test]
fn a_cut_text_is_compared_without_its_cut_end_and_an_uncut_text_whole() {
    // Cut at the same raw length, the real panic's three-digit thread id shows two characters
    // fewer than the fake's one-digit id once both read `(<tid>)`.
    let cut = |raw: &str| {
        let recorded = format!("{}…", raw.chars().take(60).collect::<String>());
        recut(&recorded, &normalise_panic_thread_id(&recorded))
    };
    let tail = "panicked at launcher.rs:60:13: bubblewrap is unavailable: no system bwrap";
    assert_eq!(
        cut(&format!("thread 'main' (104) {tail}")),
        cut(&format!("thread 'main' (2) {tail}"))
    );
    assert_ne!(
        cut(&format!("thread 'main' (2) {tail}")),
        cut(&format!("thread 'main' (2) panicked elsewhere, {tail}"))
    );
    assert_eq!(recut("whole (2)", "whole (<tid>)"), "whole (<tid>)");
}

#[test]
fn the_first_divergence_is_named() {
    let fake = normalise(&run("t", "u", "/a", false), "/a");
    let mut other = run("t", "u", "/a", false);
    other.truncate(2);
    let real = normalise(&other, "/a");
    let divergence = first_divergence(&fake, &real).unwrap();
    assert_eq!(divergence.index, 2);
    assert!(divergence.real.is_none());
    assert!(divergence.describe().contains("message 2"));
}

fn side(sequence: Vec<Value>, cut: Option<&str>) -> SideOutcome {
    SideOutcome {
        ended_on_its_own: true,
        cell: "c".into(),
        verdict: "pass".into(),
        graded: true,
        sequence,
        wall: std::time::Duration::ZERO,
        codex_span: None,
        cut: cut.map(String::from),
        id_shapes: Default::default(),
        sent: Vec::new(),
        answers: Vec::new(),
    }
}

/// A sequence its driver cut short compares as a prefix; without the cut, or with a
/// difference before it, the comparison stays strict.
#[test]
fn a_driver_cut_compares_as_a_prefix_and_nothing_else_does() {
    let long = normalise(&run("t", "u", "/a", false), "/a");
    let short: Vec<Value> = long[..2].to_vec();
    let (divergence, truncated) = compare(
        &side(long.clone(), None),
        &side(short.clone(), Some("hung up")),
    );
    assert_eq!(divergence, None);
    let truncated = truncated.unwrap();
    assert_eq!(
        (truncated.index, truncated.side, truncated.other_len),
        (2, "real", 3)
    );
    assert!(truncated.describe().contains("hung up"));
    let (divergence, _) = compare(&side(long.clone(), None), &side(short.clone(), None));
    assert_eq!(divergence.unwrap().index, 2);
    // The cut side's own ending (the recorder's stdin-closed and exit) is not compared with what
    // the other side's app-server went on answering; the other side's ending is.
    let ending = [
        serde_json::json!({"kind": "protocol.stdin-closed", "payload": {"launch": 1}}),
        serde_json::json!({"kind": "protocol.app-server-exited", "payload": {"launch": 1}}),
    ];
    let short_ended: Vec<Value> = short.iter().chain(&ending).cloned().collect();
    let long_ended: Vec<Value> = long.iter().chain(&ending).cloned().collect();
    let (divergence, truncated) = compare(
        &side(long_ended.clone(), None),
        &side(short_ended.clone(), Some("hung up")),
    );
    assert_eq!(divergence, None);
    assert_eq!(truncated.unwrap().index, 2);
    // Without the cut, and with a driver the harness stopped (its close is not its own
    // timing): strict.
    let mut stopped = side(short_ended, None);
    stopped.ended_on_its_own = false;
    let (divergence, _) = compare(&side(long_ended, None), &stopped);
    assert_eq!(divergence.unwrap().index, 2, "without the cut: strict");
    // The cut side must match up to the cut.
    let mut changed = short.clone();
    changed[1]["payload"]["turn_id"] = Value::String("<id-9>".into());
    let (divergence, truncated) = compare(&side(long, None), &side(changed, Some("hung up")));
    assert_eq!(divergence.unwrap().index, 1);
    assert_eq!(truncated, None);
}

/// Where the strict comparison differs only in where two drivers that ended on their own
/// closed stdin, the pair is compared up to the EARLIER close: a side whose driver closed later
/// (here codex-acp's fake, which went on answering the title thread) no longer diverges on the
/// other side's close, cut or not, while a difference before the earlier close, or in how a
/// driver or an app-server exited, still does; a driver stopped by the harness, or an
/// app-server that exited on its own before its close, keeps the comparison strict.
#[test]
fn a_pair_whose_drivers_closed_at_different_places_compares_up_to_the_earlier_close() {
    let base = normalise(&run("t", "u", "/a", false), "/a");
    let event = |kind: &str, payload: Value| serde_json::json!({"kind": kind, "payload": payload});
    let ended = |app_server: i64, driver: i64, after_close: bool| {
        vec![
            event("protocol.stdin-closed", serde_json::json!({"launch": 1})),
            event(
                "protocol.app-server-exited",
                serde_json::json!({"launch": 1, "status": app_server, "after_stdin_closed": after_close}),
            ),
            event(
                "driver.ended",
                serde_json::json!({"how": "exited", "code": driver}),
            ),
        ]
    };
    let with = |extra: usize, ending: Vec<Value>| -> Vec<Value> {
        let title = event("turn.submitted", serde_json::json!({"index": 1}));
        base.iter()
            .cloned()
            .chain(std::iter::repeat_n(title, extra))
            .chain(ending)
            .collect()
    };
    let late = with(2, ended(0, 0, true));
    let early = with(0, ended(0, 0, true));
    for (fake, real, side_name) in [
        (side(late.clone(), None), side(early.clone(), None), "real"),
        (side(early.clone(), None), side(late.clone(), None), "fake"),
        (
            side(late.clone(), Some("hung up")),
            side(early.clone(), None),
            "real",
        ),
        (
            side(early.clone(), None),
            side(late.clone(), Some("hung up")),
            "fake",
        ),
    ] {
        let (divergence, truncated) = compare(&fake, &real);
        assert_eq!(divergence, None);
        let truncated = truncated.expect("where the comparison stopped");
        assert_eq!((truncated.index, truncated.side), (base.len(), side_name));
        assert_eq!(truncated.other_len, late.len());
        assert!(
            truncated.describe().contains("stdin"),
            "{}",
            truncated.describe()
        );
    }
    // A driver the harness stopped keeps the comparison strict.
    let mut stopped = side(early.clone(), None);
    stopped.ended_on_its_own = false;
    let (divergence, truncated) = compare(&side(late.clone(), None), &stopped);
    assert_eq!(divergence.unwrap().index, base.len());
    assert_eq!(truncated, None);
    // A real difference before the earlier close still diverges.
    let mut changed = early.clone();
    changed[1]["payload"]["turn_id"] = Value::String("<id-9>".into());
    let (divergence, _) = compare(&side(late.clone(), None), &side(changed, None));
    assert_eq!(divergence.unwrap().index, 1);
    // So do a driver and an app-server that exited otherwise.
    // (After the earlier close: the app-server's exit, then the driver's.)
    for (ending, field, index) in [
        (ended(0, 1, true), "payload.code", base.len() + 1),
        (ended(1, 0, true), "payload.status", base.len()),
    ] {
        let (divergence, _) = compare(&side(late.clone(), None), &side(with(0, ending), None));
        let divergence = divergence.unwrap();
        assert_eq!(divergence.index, index);
        assert!(
            divergence.describe().contains(field),
            "{}",
            divergence.describe()
        );
    }
    // An app-server that exited before its stdin was closed is behaviour: compared whole.
    let crashed = with(0, ended(0, 0, false));
    let (divergence, _) = compare(&side(late, None), &side(crashed, None));
    assert_eq!(divergence.unwrap().index, base.len());
}

/// What the driver sent may end early on the side that ended first, as its messages do: the
/// driver stopped sending there (codex-acp's title `turn/start`, sent to the fake only); on
/// the other side, or without a truncation, it may not.
#[test]
fn what_the_driver_sent_may_end_early_on_the_side_that_ended_first() {
    let line = |n: u64| serde_json::json!({"kind": "request", "method": "m", "params": n});
    let mut fake = side(Vec::new(), None);
    fake.sent = vec![line(1), line(2)];
    let mut real = side(Vec::new(), None);
    real.sent = vec![line(1)];
    let truncated = |side: &'static str| Truncation {
        index: 1,
        side,
        reason: "closed first".into(),
        other_len: 2,
    };
    assert_eq!(
        sent_difference(&fake, &real, Some(&truncated("real"))),
        None
    );
    assert!(sent_difference(&fake, &real, Some(&truncated("fake"))).is_some());
    assert!(sent_difference(&fake, &real, None).is_some());
    real.sent = vec![line(9)];
    assert!(sent_difference(&fake, &real, Some(&truncated("real"))).is_some());
}

/// The same sequence with ids made another way (0.171's plan item UUIDs against a fake playing
/// 0.169) is a fidelity failure naming the item type; ids the model made do not count.
#[test]
fn ids_made_differently_are_a_failure_and_model_made_ids_are_one_shape() {
    let dir = tempfile::tempdir().unwrap();
    let turn = "01a2310e-f7aa-71a2-b7e9-e659bfd286b5";
    let transcript = |name: &str, plan_id: &str, message_id: &str| {
        let path = dir.path().join(name);
        let line = |kind: &str, id: &str| {
            serde_json::json!({"message": {"method": "item/completed", "params": {"turnId": turn, "item": {"type": kind, "id": id}}}})
                .to_string()
        };
        std::fs::write(
            &path,
            format!(
                "{}\n{}\n",
                line("plan", plan_id),
                line("agentMessage", message_id)
            ),
        )
        .unwrap();
        crate::fidelity::wire::app_server_id_shapes(&path, &[])
    };
    let pin = transcript("pin.jsonl", &format!("{turn}-plan"), "msg_0123");
    let new = transcript(
        "new.jsonl",
        "01a2310e-fcb4-7c82-99a4-22e0807f6661",
        "item_01_0_0",
    );
    let fake_of_new = transcript(
        "fake.jsonl",
        "01a2310e-fcb4-7c82-99a4-22e0807f6662",
        "msg_9",
    );
    let outcome = |fake: &crate::fidelity::wire::IdShapes,
                   real: &crate::fidelity::wire::IdShapes| {
        let mut fake_side = side(vec![], None);
        fake_side.id_shapes = fake.clone();
        let mut real_side = side(vec![], None);
        real_side.id_shapes = real.clone();
        PairOutcome {
            pair: "p".into(),
            scenario: "s".into(),
            id_changes: crate::fidelity::wire::id_shape_changes(
                &fake_side.id_shapes,
                &real_side.id_shapes,
            ),
            fake: fake_side,
            real: real_side,
            divergence: None,
            truncated: None,
            sent_difference: None,
            answer_difference: None,
        }
    };
    let failure = outcome(&pin, &new).failure().expect("a failure");
    assert!(failure.contains("plan item ids"), "{failure}");
    assert!(!failure.contains("agentMessage"), "{failure}");
    assert_eq!(outcome(&fake_of_new, &new).failure(), None);
}

/// What measures time (an answer's latency) and the longest line's byte count (which holds the
/// cell's paths) do not count; everything else of the protocol events still does.
#[test]
fn latencies_and_the_longest_lines_bytes_are_not_compared_but_the_rest_of_an_exchange_is() {
    use graders::events::{ClientRequestAnswered, NotificationCount, ServerNotifications};
    let exchange = |latency_ms: u64, error: Option<&str>, largest: u64, goal_updates: u64| {
        vec![
            ev(
                0,
                Source::Driver,
                Body::ClientRequestAnswered(ClientRequestAnswered {
                    launch: 1,
                    id: "2".into(),
                    method: "thread/start".into(),
                    error: error.map(|message| graders::events::RpcError {
                        code: Some(-32603),
                        message: message.into(),
                    }),
                    thread_id: Some("t".into()),
                    turn_id: None,
                    sandbox: None,
                    latency_ms,
                    cwd: None,
                    turns: None,
                    codex_home: None,
                    approval_policy: None,
                    approvals_reviewer: None,
                    model: None,
                }),
            ),
            ev(
                1,
                Source::Driver,
                Body::ServerNotifications(ServerNotifications {
                    release: Some("0.169.0".into()),
                    methods: vec![
                        NotificationCount {
                            method: "thread/goal/updated".into(),
                            count: goal_updates,
                            known: Some(true),
                            checked: goal_updates,
                            invalid: 0,
                            extra_fields: 0,
                        },
                        NotificationCount {
                            method: "turn/completed".into(),
                            count: 1 + goal_updates / 10,
                            known: Some(true),
                            checked: 1,
                            invalid: 0,
                            extra_fields: 0,
                        },
                    ],
                    unlisted: 0,
                    largest_line_bytes: largest,
                    cut_line_bytes: None,
                    not_owed: Vec::new(),
                }),
            ),
        ]
    };
    let fake = normalise(&exchange(19, None, 1926, 2), "/x");
    assert_eq!(
        first_divergence(&fake, &normalise(&exchange(784, None, 1939, 3), "/y")),
        None,
        "latencies, bytes within a size class and a goal's timing-dependent updates"
    );
    assert_eq!(fake[0]["payload"]["latency_ms"], "<ms>");
    for (other, path) in [
        (exchange(19, Some("boom"), 1926, 2), "payload.error"),
        (exchange(19, None, 70_000, 2), "payload.largest_line_bytes"),
        (
            exchange(19, None, 1926, 0),
            "payload.methods.thread/goal/updated.",
        ),
        (
            exchange(19, None, 1926, 12),
            "payload.methods.turn/completed.count",
        ),
    ] {
        let divergence = first_divergence(&fake, &normalise(&other, "/x")).expect(path);
        assert!(
            divergence.describe().contains(path),
            "{}",
            divergence.describe()
        );
    }
}

#[test]
fn a_cell_below_the_fakes_install_folder_still_reads_as_the_cell() {
    // The fake's install folder is the harness binary's: a copy in /tmp with `--out` below
    // /tmp made every path of the cell read as `<app-server-install>/…`.
    let cell = Path::new("/tmp/out/suite.runner-fake.local.case");
    let aliases = side_aliases(cell, None, Path::new("/tmp/harness"));
    let position = |alias: &str| aliases.iter().position(|(_, a)| a == alias).unwrap();
    assert!(
        position("<cell>") < position("<app-server-install>"),
        "{aliases:?}"
    );
    let workspace = format!("{}/driver/workspace", cell.display());
    let mut text = workspace.clone();
    for (path, alias) in &aliases {
        text = text.replace(path.as_str(), alias);
    }
    assert_eq!(text, "<cell>/workspace", "{workspace}");
}

/// The `turn/start` answer and the `turn/started` of its turn compare in either order (the
/// real Codex writes them from different tasks); any other move of an event still diverges.
#[test]
fn a_turn_start_answer_and_its_turn_started_compare_in_either_order() {
    use graders::events::ClientRequestAnswered;
    let answered = |turn: &str| {
        Body::ClientRequestAnswered(ClientRequestAnswered {
            launch: 1,
            id: "3".into(),
            method: "turn/start".into(),
            error: None,
            thread_id: None,
            turn_id: Some(turn.into()),
            sandbox: None,
            latency_ms: 1,
            cwd: None,
            turns: None,
            codex_home: None,
            approval_policy: None,
            approvals_reviewer: None,
            model: None,
        })
    };
    let started = |turn: &str| {
        Body::TurnStarted(TurnStarted {
            turn_id: turn.into(),
        })
    };
    let sequence = |bodies: Vec<Body>| {
        let events: Vec<Event> = bodies
            .into_iter()
            .enumerate()
            .map(|(seq, body)| ev(seq as u64, Source::Driver, body))
            .collect();
        normalise(&events, "/a")
    };
    let answer_first = sequence(vec![answered("u"), started("u")]);
    assert_eq!(answer_first[0]["kind"], "protocol.client-request-answered");
    assert_eq!(sequence(vec![started("u"), answered("u")]), answer_first);
    // Another turn's start stays where it was.
    let other = sequence(vec![started("v"), answered("u")]);
    assert_eq!(other[0]["kind"], "turn.started");
}

/// A fake playing 0.169 beside a real Codex of another release: what 0.169 sends only to
/// experimental clients is that release's measurement, not a difference of the pair.
#[test]
fn another_releases_experimental_only_notifications_are_not_a_difference() {
    let started = |protocol: serde_json::Value| serde_json::json!({"kind": "run.started", "payload": {"protocol": protocol}});
    let mut fake = vec![started(serde_json::json!({
        "release": "0.169.0",
        "experimental_only_notifications": ["thread/readState/changed"]
    }))];
    let mut real = vec![started(serde_json::json!({"release": "0.160.0"}))];
    super::normalise::mask_release(&mut fake);
    super::normalise::mask_release(&mut real);
    assert_eq!(fake, real);
}

/// The same beside a client without `experimentalApi` (PyPI codex-python-sdk-unofficial
/// 0.128.0): the 0.169 fake owes it none of `thread/readState/changed`, while 0.160 has no such
/// notification to withhold. That summary comes after the driver's close, so the pair read
/// "same to the real cut (5 of 9)" instead of the same whole run.
#[test]
fn another_releases_notifications_not_owed_are_not_a_difference() {
    let summary = |release: &str, not_owed: serde_json::Value| {
        let mut payload =
            serde_json::json!({"release": release, "methods": [], "largest_line_bytes": 2016});
        if !not_owed.is_null() {
            payload["not_owed"] = not_owed;
        }
        serde_json::json!({"kind": "protocol.server-notifications", "payload": payload})
    };
    let mut fake = vec![summary(
        "0.169.0",
        serde_json::json!(["thread/readState/changed"]),
    )];
    let mut real = vec![summary("0.160.0", serde_json::Value::Null)];
    super::normalise::mask_release(&mut fake);
    super::normalise::mask_release(&mut real);
    assert_eq!(fake, real);
}

/// The Python SDK closes stdin and sends SIGTERM 2 ms later: under load the tap can record the
/// forwarded signal's exit before the end of the driver's input. Either order is the same run.
#[test]
fn a_signalled_exit_compares_the_same_before_or_after_the_stdin_close() {
    let closed = serde_json::json!({"kind": "protocol.stdin-closed", "payload": {"launch": 1}});
    let after_close = serde_json::json!({"kind": "protocol.app-server-exited",
        "payload": {"launch": 1, "after_stdin_closed": true}});
    let after_signal = serde_json::json!({"kind": "protocol.app-server-exited",
        "payload": {"launch": 1, "after_stdin_closed": false, "after_driver_signal": true}});
    let mut first = vec![closed.clone(), after_close];
    let mut raced = vec![after_signal.clone(), closed];
    super::normalise::order_signalled_launch_end(&mut first);
    super::normalise::order_signalled_launch_end(&mut raced);
    assert_eq!(first, raced);
    // A signalled exit the driver never followed with a close keeps its order and its flags.
    let mut alone = vec![after_signal.clone()];
    super::normalise::order_signalled_launch_end(&mut alone);
    assert_eq!(alone, vec![after_signal]);
}

#[test]
fn an_exit_whose_close_the_tap_never_read_compares_as_its_close_then_the_exit() {
    let exit = |after_close: bool| serde_json::json!({"kind": "protocol.app-server-exited", "payload": {"launch": 1, "status": 0, "signal": null, "error": null, "after_stdin_closed": after_close}});
    let closed = serde_json::json!({"kind": "protocol.stdin-closed", "payload": {"launch": 1}});
    let mut raced = vec![exit(false)];
    super::normalise::close_before_an_unclosed_exit(&mut raced);
    assert_eq!(raced, vec![closed.clone(), exit(false)]);
    // A crash (a status other than 0) keeps its place: the app-server ended before any close.
    let mut crashed = vec![
        serde_json::json!({"kind": "protocol.app-server-exited", "payload": {"launch": 1, "status": 1}}),
    ];
    super::normalise::close_before_an_unclosed_exit(&mut crashed);
    assert_eq!(crashed.len(), 1);
    // A sequence that saw its close is left as it is.
    let mut seen = vec![closed.clone(), exit(true)];
    super::normalise::close_before_an_unclosed_exit(&mut seen);
    assert_eq!(seen, vec![closed, exit(true)]);
}
