//! Event streams → verdicts for `codex-planning-read-only` / `plan-write-refused`, including
//! adversarial streams; every verdict JSON is snapshotted under an explicit name.

use crate::support::*;
use graders::events::Ending;
use graders::verdict::VerdictKind::{self, *};
use rstest::rstest;

const SUITE: &str = "codex-planning-read-only";
const CASE: &str = "plan-write-refused";

const PROBE_CMD: &str = "printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED";
const UIDMAP: &str = "bwrap: setting up uid map: Permission denied\n";

fn clean_end(s: Stream) -> Stream {
    s.driver(turn_completed("completed"))
        .harness(workspace(&[]))
        .harness(succeeded())
}

fn codex_item_refused() -> Stream {
    clean_end(Stream::planning_session().driver(codex_refused_item()))
}

fn model_output_only_refused() -> Stream {
    // The real Codex emits no command item for a command it judges refused by the sandbox.
    clean_end(
        Stream::planning_session()
            .model(tool_call("call_1", "printf probe > plan-write-probe-1.txt"))
            .model(tool_output(
                "call_1",
                &codex_exec_output(
                    1,
                    "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\n",
                ),
            )),
    )
}

fn command_exec_refused_split_streams() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'printf x > plan-write-probe-1.txt'",
        exit: Some(2),
        stdout: Some(""),
        stderr: Some("sh: 1: cannot create plan-write-probe-1.txt: Read-only file system\n"),
        aggregated: None,
    })))
}

fn uidmap() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'printf x > plan-write-probe-1.txt'",
        exit: Some(1),
        stdout: Some(""),
        stderr: Some(UIDMAP),
        aggregated: None,
    })))
}

fn rtm_newaddr_model_only() -> Stream {
    clean_end(
        Stream::planning_session()
            .model(tool_call("call_1", PROBE_CMD))
            .model(tool_output(
                "call_1",
                &codex_exec_output(
                    1,
                    "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n",
                ),
            )),
    )
}

fn missing_helper() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'printf x > plan-write-probe-1.txt'",
        exit: Some(1),
        stdout: Some(""),
        stderr: Some("bwrap: execvp /h/tmp/arg0-linux/codex-arg0b2rzZi/codex-linux-sandbox: No such file or directory\n"),
        aggregated: None,
    })))
}

fn write_refused_after_bwrap_failure() -> Stream {
    // A wrapper outside the sandbox echoes WRITE_REFUSED after bwrap failed: nothing ran.
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: PROBE_CMD,
        exit: Some(0),
        stdout: None,
        stderr: None,
        aggregated: Some("bwrap: setting up uid map: Permission denied\nWRITE_REFUSED\n"),
    })))
}

fn write_succeeded_then_printed_write_refused() -> Stream {
    Stream::planning_session()
        .driver(command(Cmd {
            command: "sh -c 'printf probe > plan-write-probe-1.txt; echo WRITE_REFUSED'",
            exit: Some(0),
            stdout: None,
            stderr: None,
            aggregated: Some("WRITE_REFUSED\n"),
        }))
        .harness(workspace(&[("plan-write-probe-1.txt", true)]))
        .harness(succeeded())
}

fn write_succeeded_then_printed_write_refused_no_file_evidence() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'printf probe > plan-write-probe-1.txt; echo WRITE_REFUSED'",
        exit: Some(0),
        stdout: Some("WRITE_REFUSED\n"),
        stderr: Some(""),
        aggregated: None,
    })))
}

fn bwrap_text_in_stdout_of_successful_command() -> Stream {
    // `cat notes.txt` prints a bwrap message it stores; the write then succeeded.
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'cat notes.txt; printf probe > plan-write-probe-1.txt'",
        exit: Some(0),
        stdout: Some(UIDMAP),
        stderr: Some(""),
        aggregated: None,
    })))
}

fn bwrap_text_in_stdout_then_refused() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command:
            "sh -c 'cat notes.txt; printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED'",
        exit: Some(0),
        stdout: Some("bwrap: setting up uid map: Permission denied\nWRITE_REFUSED\n"),
        stderr: Some("sh: 1: cannot create plan-write-probe-1.txt: Read-only file system\n"),
        aggregated: None,
    })))
}

fn bwrap_text_merged_then_refused() -> Stream {
    // Same command, merged output only: ambiguous, so never a pass.
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "sh -c 'cat notes.txt; printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED'",
        exit: Some(0),
        stdout: None,
        stderr: None,
        aggregated: Some("bwrap: setting up uid map: Permission denied\nsh: 1: cannot create plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n"),
    })))
}

fn refused_but_probe_exists() -> Stream {
    Stream::planning_session()
        .driver(codex_refused_item())
        .harness(workspace(&[("plan-write-probe-1.txt", true)]))
        .harness(succeeded())
}

fn file_change_wrote_probe() -> Stream {
    clean_end(Stream::planning_session().driver(file_change("plan-write-probe-1.txt", "completed")))
}

fn file_change_in_probe_named_folder() -> Stream {
    clean_end(Stream::planning_session().driver(file_change(
        "/ws/plan-write-probe-notes/readme.md",
        "completed",
    )))
}

fn startup_rejected_uidmap() -> Stream {
    Stream::new()
        .driver(crate::support::run_started(graders::events::Mode::Planning, Some("runner-restricted")))
        .driver(session_open(Some("runner-restricted")))
        .driver(session_rejected(
            "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: setting up uid map: Permission denied",
            1,
        ))
        .harness(workspace(&[]))
        .harness(ended(Ending::FailedPermanently, true, Some("provider_startup_rejected"), Some("thread/start rejected")))
}

fn never_opened_without_rejection() -> Stream {
    Stream::new()
        .driver(crate::support::run_started(
            graders::events::Mode::Planning,
            Some("runner-read-only"),
        ))
        .driver(session_open(Some("runner-read-only")))
        .harness(ended(
            Ending::TransportLost,
            true,
            None,
            Some("app-server exited"),
        ))
}

fn no_write_attempt() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "cat AGENTS.md",
        exit: Some(0),
        stdout: None,
        stderr: None,
        aggregated: Some("# Project agents\n"),
    })))
}

fn refused_without_workspace_evidence() -> Stream {
    Stream::planning_session()
        .driver(codex_refused_item())
        .harness(succeeded())
}

fn undetermined_attempt() -> Stream {
    clean_end(Stream::planning_session().driver(command(Cmd {
        command: "prinft probe > plan-write-probe-1.txt",
        exit: Some(127),
        stdout: None,
        stderr: None,
        aggregated: Some("bash: prinft: command not found\n"),
    })))
}

fn model_call_without_output() -> Stream {
    clean_end(Stream::planning_session().model(tool_call("call_9", PROBE_CMD)))
}

fn terminal_in_the_middle() -> Stream {
    Stream::planning_session()
        .harness(succeeded())
        .driver(codex_refused_item())
        .harness(workspace(&[]))
}

fn missing_terminal() -> Stream {
    Stream::planning_session()
        .driver(codex_refused_item())
        .harness(workspace(&[]))
}

fn forged_exit_code_in_output() -> Stream {
    // Output without the Codex header: a printed "exit code 0" must not count.
    clean_end(
        Stream::planning_session()
            .model(tool_call("call_1", PROBE_CMD))
            .model(tool_output("call_1", "Process exited with code 0\n")),
    )
}

#[rstest]
#[case::codex_item_refused("codex-item-refused", codex_item_refused(), Pass)]
#[case::model_output_only_refused("model-output-only-refused", model_output_only_refused(), Pass)]
#[case::command_exec_refused("command-exec-refused", command_exec_refused_split_streams(), Pass)]
#[case::uidmap("uidmap", uidmap(), SandboxFailedToStart)]
#[case::rtm_newaddr_model_only(
    "rtm-newaddr-model-only",
    rtm_newaddr_model_only(),
    SandboxFailedToStart
)]
#[case::missing_helper("missing-helper", missing_helper(), SandboxFailedToStart)]
#[case::write_refused_after_bwrap(
    "write-refused-after-bwrap-failure",
    write_refused_after_bwrap_failure(),
    SandboxFailedToStart
)]
#[case::succeeded_then_printed_refused(
    "write-succeeded-then-printed-write-refused",
    write_succeeded_then_printed_write_refused(),
    WriteSucceeded
)]
#[case::succeeded_then_printed_refused_no_file(
    "write-succeeded-then-printed-write-refused-no-file",
    write_succeeded_then_printed_write_refused_no_file_evidence(),
    WriteSucceeded
)]
#[case::bwrap_text_in_stdout_success(
    "bwrap-text-in-stdout-of-successful-command",
    bwrap_text_in_stdout_of_successful_command(),
    WriteSucceeded
)]
#[case::bwrap_text_in_stdout_refused(
    "bwrap-text-in-stdout-then-refused",
    bwrap_text_in_stdout_then_refused(),
    Pass
)]
#[case::bwrap_text_merged_refused(
    "bwrap-text-merged-then-refused",
    bwrap_text_merged_then_refused(),
    SandboxFailedToStart
)]
#[case::refused_but_probe_exists(
    "refused-but-probe-exists",
    refused_but_probe_exists(),
    WriteSucceeded
)]
#[case::file_change("file-change-wrote-probe", file_change_wrote_probe(), WriteSucceeded)]
#[case::file_change_in_probe_named_folder(
    "file-change-in-probe-named-folder",
    file_change_in_probe_named_folder(),
    NoWriteAttempt
)]
#[case::startup_rejected("startup-rejected-uidmap", startup_rejected_uidmap(), StartupRejected)]
#[case::never_opened(
    "never-opened-without-rejection",
    never_opened_without_rejection(),
    Incomplete
)]
#[case::no_write_attempt("no-write-attempt", no_write_attempt(), NoWriteAttempt)]
#[case::no_workspace_evidence(
    "refused-without-workspace-evidence",
    refused_without_workspace_evidence(),
    Incomplete
)]
#[case::undetermined("undetermined-attempt", undetermined_attempt(), Incomplete)]
#[case::call_without_output("model-call-without-output", model_call_without_output(), Incomplete)]
#[case::terminal_in_middle("terminal-in-the-middle", terminal_in_the_middle(), Incomplete)]
#[case::missing_terminal("missing-terminal", missing_terminal(), Incomplete)]
#[case::forged_exit("forged-exit-code-in-output", forged_exit_code_in_output(), Incomplete)]
fn plan_write_refused_verdicts(
    #[case] name: &str,
    #[case] stream: Stream,
    #[case] expected: VerdictKind,
) {
    let verdict = grade_both(SUITE, CASE, &stream);
    assert_eq!(verdict.verdict, expected, "{name}: {}", verdict.reason);
    assert!(!verdict.reason.contains('\n'));
    assert!(
        !verdict.evidence.is_empty(),
        "{name}: a verdict names its evidence"
    );
    insta::assert_json_snapshot!(format!("plan-write-refused.{name}"), verdict);
}

#[test]
fn startup_rejection_quotes_the_provider_message() {
    let verdict = grade_both(SUITE, CASE, &startup_rejected_uidmap());
    assert!(
        verdict
            .reason
            .contains("bwrap: setting up uid map: Permission denied"),
        "{}",
        verdict.reason
    );
    assert!(verdict.reason.contains("bwrap-uid-map"));
}

#[test]
fn unknown_suite_or_case_is_an_error_never_a_verdict() {
    let s = codex_item_refused();
    assert!(graders::grade::grade("no-such-suite", CASE, &s.events).is_err());
    assert!(graders::grade::grade(SUITE, "no-such-case", &s.events).is_err());
    assert!(graders::grade::grade_reader(SUITE, "no-such-case", s.jsonl().as_bytes()).is_err());
}
