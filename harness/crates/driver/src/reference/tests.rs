use super::*;
use crate::launch::Target;
use graders::events::Mode;

fn plan(target: Target, policy: PolicyGeneration) -> LaunchPlan {
    let request = LaunchRequest {
        mode: Mode::Planning,
        target,
        network_enabled: false,
        policy,
        workspace: "/w".into(),
    };
    let host = HostPaths::from_env_pairs(&[("HOME".into(), "/h".into())], None);
    launch::plan_with(&request, &host)
}

fn message(body: &Body) -> &str {
    match body {
        Body::Diagnostic(d) => d.message.as_str(),
        other => panic!("not a diagnostic: {other:?}"),
    }
}

#[test]
fn a_rules_only_change_resumes_the_saved_thread() {
    let first = plan(Target::ExternalSandbox, PolicyGeneration::Legacy);
    let next = plan(Target::ExternalSandbox, PolicyGeneration::Current);
    assert_ne!(first.argv, next.argv, "the profile rules differ");
    let decision = relaunch_decision(&first, &next, "t-1".into());
    assert_eq!(
        decision.opening,
        Opening::Resume {
            thread_id: "t-1".into()
        }
    );
    let relaunched = decision.relaunched;
    assert_eq!(relaunched.identity, first.identity);
    assert_eq!(relaunched.identity, next.identity);
    assert_eq!(relaunched.policy, PolicyGeneration::Current);
    assert_eq!(relaunched.argv, next.argv);
    assert!(
        relaunched
            .argv
            .iter()
            .any(|a| a.contains("\":root\"=\"read\"")),
        "{:?}",
        relaunched.argv
    );
    assert_eq!(
        relaunched.thread_permissions,
        next.summary().thread_permissions
    );
    assert_eq!(relaunched.resume_thread.as_deref(), Some("t-1"));
    assert!(message(&decision.note).contains("resuming the saved thread t-1"));
}

#[test]
fn a_changed_identity_starts_a_new_thread_and_says_so() {
    let first = plan(Target::Local, PolicyGeneration::Current);
    let next = plan(Target::ExternalSandbox, PolicyGeneration::Current);
    let decision = relaunch_decision(&first, &next, "t-1".into());
    assert_eq!(decision.opening, Opening::Start { persist: true });
    assert_eq!(decision.relaunched.identity, next.identity);
    assert_ne!(decision.relaunched.identity, first.identity);
    assert_eq!(decision.relaunched.resume_thread, None);
    let Body::Diagnostic(note) = &decision.note else {
        panic!("not a diagnostic")
    };
    assert_eq!(note.level, Level::Warn);
    assert!(note
        .message
        .contains("is not resumed; starting a new thread"));
}
