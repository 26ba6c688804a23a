//! The runner contract's newer cases, played by the reference driver as the matrix plays them
//! (`harness drive` through the wire tap, against each case's fake builtin) and graded from the
//! wire: the reference driver passes every one. The failing runs of each rule are the graders'
//! own tests (graders/tests/all/runner_contract.rs).

use crate::common;

use common::tapped::{self, Deliver};
use driver::task::{ContextBoundary, Relaunch, Task};
use graders::events::Mode;
use graders::verdict::VerdictKind::Pass;

fn task(prompt: &str) -> Task {
    Task::new(Mode::Standard, prompt)
}

#[tokio::test]
async fn explicit_skills_and_the_skillless_boundary() {
    let mut skilled = task("Use $imagegen to draw a small logo for the README.");
    skilled.context = Some(ContextBoundary {
        include_skill_instructions: true,
    });
    skilled.relaunch = Some(Relaunch {
        saved_under: None,
        policy: None,
        prompt: "Go on with $imagegen: make the logo smaller.".into(),
    });
    let run = tapped::run("builtin:explicit-skill", skilled, Deliver::Nothing).await;
    run.assert_verdict("skills", "explicit-skill", Pass);
    let mut skillless = task("Summarise the README.");
    skillless.context = Some(ContextBoundary {
        include_skill_instructions: false,
    });
    let run = tapped::run("builtin:skillless", skillless, Deliver::Nothing).await;
    run.assert_verdict("skills", "skillless", Pass);
}

#[tokio::test]
async fn unsafe_workspaces_are_refused_before_anything_is_launched() {
    for (case, workspace) in [
        ("workspace-root", "/"),
        ("workspace-contains-home", "{home}/.."),
        ("workspace-in-codex-home", "{codex_home}/work"),
    ] {
        let mut refused = task("Summarise the README.");
        refused.workspace = Some(workspace.into());
        let run = tapped::run("builtin:unsafe-workspace", refused, Deliver::Nothing).await;
        run.assert_verdict("unsafe-workspaces", case, Pass);
        assert!(run.transcript.is_empty(), "{case}: nothing launched");
        assert!(
            run.driver_events
                .contains("\"error_code\":\"unsafe_workspace\""),
            "{case}: {}",
            run.driver_events
        );
    }
}

#[tokio::test]
async fn the_app_server_environment_is_the_allowlist() {
    let run = tapped::run(
        "builtin:allowlisted-environment",
        task("Summarise the README."),
        Deliver::Nothing,
    )
    .await;
    run.assert_verdict("app-server-environment", "allowlisted-environment", Pass);
}

#[tokio::test]
async fn an_identical_result_retry_is_acknowledged_and_a_changed_one_refused() {
    let run = tapped::run(
        "builtin:identical-retry-acknowledged",
        task("Summarise the README."),
        Deliver::Nothing,
    )
    .await;
    run.assert_verdict("result-idempotence", "identical-retry-acknowledged", Pass);
}

#[tokio::test]
async fn recovery_reconciles_only_the_saved_turn() {
    for (scenario, exit) in [
        ("reconciled-after-crash", 0),
        ("saved-turn-missing", 1),
        ("other-turn-active", 1),
    ] {
        let mut recovering = task("Summarise the README.");
        recovering.resume_on_crash = true;
        let run = tapped::run(&format!("builtin:{scenario}"), recovering, Deliver::Nothing).await;
        run.assert_verdict("resume-reconciliation", scenario, Pass);
        assert_eq!(run.exit_code, Some(exit), "{scenario}");
    }
}
