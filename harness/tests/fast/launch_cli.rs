//! `harness launch` prints the plan as JSON and refuses bad configuration clearly.

use assert_cmd::Command;
use predicates::str::contains;

#[test]
fn prints_the_plan_for_planning_inside_an_external_sandbox() {
    let out = Command::cargo_bin("harness")
        .unwrap()
        .args([
            "launch",
            "--mode",
            "planning",
            "--target",
            "external-sandbox",
            "--network",
            "enabled",
            "--workspace",
            "/workspace/project",
        ])
        .env_remove("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let plan: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        plan["thread_params"]["permissions"],
        "paperclip-runner-workspace-read-only"
    );
    assert_eq!(plan["turn_params"]["collaboration_mode"], "plan");
    assert!(plan["argv"].as_array().unwrap().iter().any(|a| a == r#"permissions.paperclip-runner-workspace-read-only={filesystem={":root"="read"},network={enabled=true}}"#));
    assert_eq!(plan["identity"].as_str().unwrap().len(), 64);
}

#[test]
fn reads_the_target_from_the_environment_and_rejects_bad_values() {
    Command::cargo_bin("harness")
        .unwrap()
        .args(["launch", "--mode", "standard", "--workspace", "/w"])
        .env("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX", "1")
        .env("PAPERCLIP_RUNNER_NETWORK_ACCESS", "disabled")
        .assert()
        .success()
        .stdout(contains("paperclip-runner-external-sandbox"));
    Command::cargo_bin("harness")
        .unwrap()
        .args(["launch", "--mode", "ask", "--workspace", "/w"])
        .env("PAPERCLIP_RUNNER_NETWORK_ACCESS", "sometimes")
        .assert()
        .code(2)
        .stderr(contains(
            "PAPERCLIP_RUNNER_NETWORK_ACCESS must be `enabled` or `disabled`, got `sometimes`",
        ));
}
