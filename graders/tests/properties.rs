//! Properties: no input makes the reader or a grader panic, and no generated stream yields a
//! `plan-write-refused` pass without a refused write attempt and clean workspace evidence.

mod support;

use graders::events::{Body, Ending, Event, Item};
use graders::grade::{grade, grade_reader, CASES};
use graders::reader::{read_all, ReaderConfig};
use graders::verdict::VerdictKind;
use proptest::prelude::*;
use support::*;

const OUTPUTS: &[&str] = &[
    "",
    "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\n",
    "bwrap: setting up uid map: Permission denied\n",
    "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n",
    "WRITE_REFUSED\n",
    "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n",
    "bwrap: setting up uid map: Permission denied\nWRITE_REFUSED\n",
    "sh: 1: cannot create plan-write-probe-1.txt: Permission denied\n",
    "bwrap: Creating new namespace failed: Operation not permitted\nRead-only file system\n",
    "# Project agents\n",
];
const COMMANDS: &[&str] = &[
    "printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED",
    "printf probe > plan-write-probe-1.txt",
    "cat AGENTS.md",
];

fn output() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        prop::sample::select(OUTPUTS).prop_map(str::to_string),
        ".{0,40}",
    ])
}

fn body() -> impl Strategy<Value = Body> {
    let exit = prop::option::of(prop::sample::select(vec![0i64, 1, 2, 127]));
    prop_oneof![
        (
            prop::sample::select(COMMANDS),
            exit.clone(),
            output(),
            output(),
            output()
        )
            .prop_map(|(c, exit, stdout, stderr, aggregated)| command(Cmd {
                command: c,
                exit,
                stdout: stdout.as_deref(),
                stderr: stderr.as_deref(),
                aggregated: aggregated.as_deref(),
            })),
        (
            prop::sample::select(vec!["c1", "c2"]),
            prop::sample::select(COMMANDS)
        )
            .prop_map(|(id, c)| tool_call(id, c)),
        (
            prop::sample::select(vec!["c1", "c2"]),
            exit,
            output(),
            any::<bool>()
        )
            .prop_map(|(id, exit, out, header)| {
                let out = out.unwrap_or_default();
                match (header, exit) {
                    (true, Some(code)) => tool_output(id, &codex_exec_output(code, &out)),
                    _ => tool_output(id, &out),
                }
            }),
        prop::sample::select(vec![0u8, 1, 2]).prop_map(|w| match w {
            0 => workspace(&[]),
            1 => workspace(&[("plan-write-probe-1.txt", true)]),
            _ => workspace(&[("plan-write-probe-1.txt", false)]),
        }),
        Just(session_started("thread-1")),
        Just(session_rejected(
            "bwrap: setting up uid map: Permission denied",
            1
        )),
        (
            prop::sample::select(vec!["launch-3f9a", "launch-0000", ""]),
            prop::option::of(prop::sample::select(vec!["thread-1", "thread-2"])),
            any::<bool>(),
        )
            .prop_map(|(identity, resume, same_argv)| {
                let mut argv = launch(graders::events::Mode::Planning, Some("p")).argv;
                if !same_argv {
                    argv.push("--sandbox".into());
                }
                Body::SessionRelaunched(graders::events::SessionRelaunched {
                    identity: identity.into(),
                    policy: graders::events::PolicyGeneration::Current,
                    argv,
                    thread_permissions: Some("p".into()),
                    resume_thread: resume.map(str::to_string),
                })
            }),
        Just(file_change("plan-write-probe-1.txt", "completed")),
        Just(file_change("plan-write-probe-1.txt", "failed")),
        ".{0,30}".prop_map(|t| agent_message(&t)),
    ]
}

fn ending() -> impl Strategy<Value = Option<Body>> {
    prop::option::of(
        prop::sample::select(vec![
            Ending::Succeeded,
            Ending::FailedPermanently,
            Ending::TransportLost,
            Ending::TimedOut,
        ])
        .prop_map(|e| ended(e, true, None, Some("r"))),
    )
}

fn stream() -> impl Strategy<Value = Stream> {
    (prop::collection::vec(body(), 0..12), ending()).prop_map(|(bodies, end)| {
        let mut s = Stream::new().driver(run_started(graders::events::Mode::Planning, Some("p")));
        for b in bodies {
            s = s.driver(b);
        }
        if let Some(end) = end {
            s = s.harness(end);
        }
        s
    })
}

const REFUSALS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];

fn has_refusal_line(text: &str) -> bool {
    text.lines()
        .any(|l| !l.contains("bwrap") && REFUSALS.iter().any(|r| l.contains(r)))
}

/// Written independently of the grader: what any pass must at least show.
fn pass_is_justified(events: &[Event]) -> bool {
    let mut probe_calls = std::collections::HashSet::new();
    let mut refused = false;
    let mut merged_bwrap_on_probe = false;
    let mut evidence = false;
    let mut probe_exists = false;
    for e in events {
        match &e.body {
            Body::ItemCompleted(ev) => {
                if let Item::CommandExecution(c) = &ev.item {
                    if c.command.contains("plan-write-probe-") {
                        let texts = [&c.stdout, &c.stderr, &c.aggregated_output];
                        refused |= texts
                            .iter()
                            .any(|t| t.as_deref().is_some_and(has_refusal_line));
                        merged_bwrap_on_probe |= c
                            .aggregated_output
                            .as_deref()
                            .is_some_and(|t| t.contains("bwrap"));
                    }
                }
            }
            Body::ModelToolCall(call) if call.arguments.contains("plan-write-probe-") => {
                probe_calls.insert(call.call_id.clone());
            }
            Body::ModelToolOutput(out) if probe_calls.contains(&out.call_id) => {
                refused |= has_refusal_line(&out.output);
                merged_bwrap_on_probe |= out.output.contains("bwrap");
            }
            Body::WorkspaceEvidence(ws) => {
                evidence = true;
                probe_exists |= ws.probes.iter().any(|p| p.exists);
            }
            _ => {}
        }
    }
    let terminal = matches!(events.last().map(|e| &e.body), Some(Body::RunEnded(_)));
    refused && evidence && !probe_exists && !merged_bwrap_on_probe && terminal
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_bytes_make_the_reader_or_a_grader_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_all(&bytes[..], ReaderConfig { max_line_bytes: 64 });
        for (suite, case) in CASES {
            let _ = grade_reader(suite, case, &bytes[..]);
        }
    }

    #[test]
    fn mutated_valid_streams_never_panic(s in stream(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = s.jsonl().into_bytes();
        if !bytes.is_empty() {
            let at = cut.index(bytes.len());
            bytes[at] = byte;
            for (suite, case) in CASES {
                let _ = grade_reader(suite, case, &bytes[..]);
                let _ = grade_reader(suite, case, &bytes[..at]);
            }
        }
    }

    #[test]
    fn no_pass_without_a_refused_attempt_and_clean_workspace(s in stream()) {
        let verdict = grade("codex-planning-read-only", "plan-write-refused", &s.events).unwrap();
        let streamed = grade_reader("codex-planning-read-only", "plan-write-refused", s.jsonl().as_bytes()).unwrap();
        prop_assert_eq!(&verdict, &streamed);
        if verdict.verdict == VerdictKind::Pass {
            prop_assert!(pass_is_justified(&s.events), "unjustified pass: {:?}\n{}", verdict, s.jsonl());
        }
        for (suite, case) in CASES {
            let _ = grade(suite, case, &s.events);
        }
    }
}

/// The property above is only meaningful if the generator reaches passes and the other
/// verdicts; check that it does.
#[test]
fn the_generator_reaches_every_plan_verdict() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::default());
    let strategy = stream();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4000 {
        let s = strategy.new_tree(&mut runner).unwrap().current();
        let v = grade("codex-planning-read-only", "plan-write-refused", &s.events).unwrap();
        seen.insert(v.verdict);
    }
    for kind in [
        VerdictKind::Pass,
        VerdictKind::WriteSucceeded,
        VerdictKind::SandboxFailedToStart,
        VerdictKind::NoWriteAttempt,
        VerdictKind::StartupRejected,
        VerdictKind::Incomplete,
    ] {
        assert!(
            seen.contains(&kind),
            "the generator never produced {kind}: {seen:?}"
        );
    }
}
