//! The launch policy for every mode × target × network × policy combination: the rules of
//! `driver::launch`, checked on the plan, plus a named snapshot of each plan.

use driver::launch::profiles::{self, Access, FsEntry, HostPaths};
use driver::launch::{
    network_from, plan_with, target_from, LaunchEnvError, LaunchPlan, LaunchRequest, Mode,
    PolicyGeneration, Target, SHELL_ENV_ALLOWLIST,
};
use rstest::rstest;
use std::path::PathBuf;

fn host() -> HostPaths {
    HostPaths {
        home: Some("/home/runner".into()),
        codex_home: Some("/var/lib/codex-home".into()),
        install_dir: Some("/opt/codex/vendor/x86_64-unknown-linux-musl".into()),
    }
}

fn request(mode: Mode, target: Target, network: bool, policy: PolicyGeneration) -> LaunchRequest {
    LaunchRequest {
        mode,
        target,
        network_enabled: network,
        policy,
        workspace: PathBuf::from("/workspace/project"),
    }
}

fn name(mode: Mode, target: Target, network: bool, policy: PolicyGeneration) -> String {
    let s = |v: serde_json::Value| v.as_str().unwrap().to_string();
    format!(
        "{}.{}.network-{}.{}",
        s(serde_json::to_value(mode).unwrap()),
        s(serde_json::to_value(target).unwrap()),
        if network { "on" } else { "off" },
        s(serde_json::to_value(policy).unwrap()),
    )
}

/// The value of the last `-c key=value` for `key`.
fn config_value<'a>(plan: &'a LaunchPlan, key: &str) -> Option<&'a str> {
    plan.argv
        .windows(2)
        .rev()
        .filter(|w| w[0] == "-c")
        .find_map(|w| w[1].strip_prefix(key)?.strip_prefix('='))
}

#[rstest]
fn launch_rules_hold(
    #[values(Mode::Planning, Mode::Standard, Mode::Ask)] mode: Mode,
    #[values(Target::Local, Target::Ssh, Target::ExternalSandbox)] target: Target,
    #[values(false, true)] network: bool,
    #[values(PolicyGeneration::Current, PolicyGeneration::Legacy)] policy: PolicyGeneration,
) {
    let req = request(mode, target, network, policy);
    let plan = plan_with(&req, &host());
    let cell = name(mode, target, network, policy);

    // Every `-c` value is `key=TOML` that parses, as Codex requires.
    assert_eq!(plan.argv.len() % 2, 0, "{cell}: argv is -c pairs");
    for pair in plan.argv.chunks(2) {
        assert_eq!(pair[0], "-c", "{cell}");
        let (key, value) = pair[1].split_once('=').expect("key=value");
        let doc = format!("v = {value}");
        toml::from_str::<toml::Table>(&doc)
            .unwrap_or_else(|e| panic!("{cell}: `{key}` value is not TOML: {e}"));
    }

    // One profile, the run's own, selected everywhere.
    assert_eq!(plan.profiles.len(), 1, "{cell}");
    let profile = plan.run_profile();
    assert_eq!(
        config_value(&plan, "default_permissions"),
        Some(format!("\"{}\"", profile.name).as_str())
    );
    assert!(config_value(&plan, &format!("permissions.{}", profile.name)).is_some());
    assert_eq!(plan.thread_params["permissions"], profile.name.as_str());
    assert_eq!(
        plan.turn_params.permissions.as_deref(),
        Some(profile.name.as_str())
    );
    assert_eq!(plan.thread_params["cwd"], "/workspace/project");
    assert_eq!(
        profile.network_enabled, network,
        "{cell}: network as configured"
    );

    // Shell environment: names from the allowlist only.
    let shell = config_value(&plan, "shell_environment_policy").unwrap();
    let parsed: toml::Table = toml::from_str(&format!("v = {shell}")).unwrap();
    for name in parsed["v"]["include_only"].as_array().unwrap() {
        assert!(
            SHELL_ENV_ALLOWLIST.contains(&name.as_str().unwrap()),
            "{cell}: {name}"
        );
    }

    let external = target == Target::ExternalSandbox;
    match mode {
        Mode::Planning => {
            assert_eq!(profile.name, profiles::WORKSPACE_READ_ONLY);
            assert!(!profile.grants_write(), "{cell}: planning stays read-only");
            assert_eq!(plan.turn_params.collaboration_mode.as_deref(), Some("plan"));
            let follow = plan.follow_up_turn_params.as_ref().unwrap();
            assert_eq!(follow.collaboration_mode.as_deref(), Some("default"));
            assert_eq!(follow.permissions, plan.turn_params.permissions);
            if external && policy == PolicyGeneration::Current {
                assert_eq!(
                    profile.filesystem,
                    vec![FsEntry::Path {
                        path: ":root".into(),
                        access: Access::Read
                    }],
                    "{cell}: full-disk read inside an external sandbox"
                );
                assert!(!profile.has_deny_entries());
            } else {
                assert_narrow(profile, Access::Read, &cell);
            }
        }
        Mode::Standard | Mode::Ask => {
            assert_eq!(
                plan.turn_params.collaboration_mode, None,
                "{cell}: no plan mode"
            );
            assert_eq!(plan.follow_up_turn_params, None);
            if external {
                assert_eq!(profile.name, profiles::EXTERNAL_SANDBOX);
            } else {
                assert_eq!(profile.name, profiles::WORKSPACE);
                assert_narrow(profile, Access::Write, &cell);
            }
        }
    }
    // The summary carries what run.started needs, identically.
    let summary = plan.summary();
    assert_eq!(summary.identity, plan.identity);
    assert_eq!(summary.thread_permissions, summary.turn_permissions);

    insta::assert_json_snapshot!(cell.as_str(), plan);
}

fn assert_narrow(profile: &profiles::Profile, workspace: Access, cell: &str) {
    assert_eq!(profile.access_of(":root"), Some(Access::None), "{cell}");
    assert_eq!(profile.access_of(":minimal"), Some(Access::Read), "{cell}");
    assert_eq!(
        profile.access_of("/home/runner"),
        Some(Access::None),
        "{cell}: HOME denied"
    );
    // CODEX_HOME is denied by root `none`, never by an explicit entry (Codex re-executes its
    // sandbox helper from under it).
    assert_eq!(
        profile.access_of("/var/lib/codex-home"),
        None,
        "{cell}: CODEX_HOME stays under root none"
    );
    assert_eq!(
        profile.access_of("/opt/codex/vendor/x86_64-unknown-linux-musl"),
        Some(Access::Read),
        "{cell}: the install folder is readable so commands can run"
    );
    assert!(
        profile.filesystem.contains(&FsEntry::WorkspaceRoots {
            subpath: ".".into(),
            access: workspace
        }),
        "{cell}"
    );
}

#[rstest]
fn identity_is_stable_across_profile_rule_changes(
    #[values(Mode::Planning, Mode::Standard, Mode::Ask)] mode: Mode,
    #[values(Target::Local, Target::Ssh, Target::ExternalSandbox)] target: Target,
) {
    let id = |network, policy, host: &HostPaths| {
        plan_with(&request(mode, target, network, policy), host).identity
    };
    let base = id(false, PolicyGeneration::Legacy, &host());
    assert_eq!(base.len(), 64);
    assert_eq!(
        base,
        id(false, PolicyGeneration::Current, &host()),
        "legacy → current"
    );
    assert_eq!(
        base,
        id(true, PolicyGeneration::Current, &host()),
        "network rule"
    );
    assert_eq!(
        base,
        id(false, PolicyGeneration::Legacy, &HostPaths::default()),
        "host paths in rules"
    );
}

#[test]
fn home_holding_codex_home_is_left_to_root_none() {
    let host = HostPaths {
        home: Some("/home/runner".into()),
        codex_home: Some("/home/runner/.codex".into()),
        install_dir: None,
    };
    let plan = plan_with(
        &request(
            Mode::Planning,
            Target::Local,
            false,
            PolicyGeneration::Current,
        ),
        &host,
    );
    let profile = plan.run_profile();
    assert_eq!(profile.access_of(":root"), Some(Access::None));
    assert_eq!(profile.access_of("/home/runner"), None);
    assert_eq!(profile.access_of("/home/runner/.codex"), None);
}

#[test]
fn legacy_to_current_changes_the_rules_but_not_the_identity() {
    let legacy = plan_with(
        &request(
            Mode::Planning,
            Target::ExternalSandbox,
            false,
            PolicyGeneration::Legacy,
        ),
        &host(),
    );
    let current = plan_with(
        &request(
            Mode::Planning,
            Target::ExternalSandbox,
            false,
            PolicyGeneration::Current,
        ),
        &host(),
    );
    assert_ne!(legacy.argv, current.argv, "the rules did change");
    assert_eq!(legacy.identity, current.identity);
}

#[test]
fn identity_changes_when_anything_that_matters_changes() {
    let base_req = request(
        Mode::Standard,
        Target::Local,
        false,
        PolicyGeneration::Current,
    );
    let base = plan_with(&base_req, &host()).identity;
    let variants = [
        LaunchRequest {
            mode: Mode::Planning,
            ..base_req.clone()
        },
        LaunchRequest {
            mode: Mode::Ask,
            ..base_req.clone()
        },
        LaunchRequest {
            target: Target::Ssh,
            ..base_req.clone()
        },
        LaunchRequest {
            target: Target::ExternalSandbox,
            ..base_req.clone()
        },
        LaunchRequest {
            workspace: "/workspace/other".into(),
            ..base_req.clone()
        },
    ];
    let mut seen = std::collections::HashSet::from([base.clone()]);
    for v in &variants {
        let id = plan_with(v, &host()).identity;
        assert!(seen.insert(id), "{v:?} must change the identity");
    }
}

#[test]
fn environment_selects_target_and_network_and_rejects_bad_values() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(target_from(env(&[])), Ok(Target::Local));
    assert_eq!(
        target_from(env(&[("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX", "1")])),
        Ok(Target::ExternalSandbox)
    );
    assert_eq!(
        target_from(env(&[("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX", "0")])),
        Ok(Target::Local)
    );
    assert!(matches!(
        target_from(env(&[("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX", "yes")])),
        Err(LaunchEnvError::BadExternalSandbox(_))
    ));
    assert_eq!(network_from(env(&[])), Ok(false));
    assert_eq!(
        network_from(env(&[("PAPERCLIP_RUNNER_NETWORK_ACCESS", "disabled")])),
        Ok(false)
    );
    assert_eq!(
        network_from(env(&[("PAPERCLIP_RUNNER_NETWORK_ACCESS", "enabled")])),
        Ok(true)
    );
    let err = network_from(env(&[("PAPERCLIP_RUNNER_NETWORK_ACCESS", "on")])).unwrap_err();
    assert!(err.to_string().contains("`on`"), "{err}");
}
