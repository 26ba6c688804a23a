//! What the protocol profile's cases make the app-server send, read from their scenarios.

use super::CaseRef;
use anyhow::{anyhow, Context, Result};
use fake_app_server::scenario::model::ModelStep;
use fake_app_server::scenario::{ForeignScope, Scenario, ServerAction};
use graders::events::Mode;
use graders::protocol::Release;
use std::collections::{BTreeMap, BTreeSet};
use suites::spec::{AppServerKind, Profile, ScenarioRef};

/// What a dynamic tool's name stands for in a scenario (the first tool the driver registered).
const DYNAMIC_TOOL: &str = "{dynamic_tool}";

/// What one case's scenario makes the app-server send.
#[derive(Debug, Default)]
struct CaseSends {
    requests: BTreeSet<String>,
    notifications: BTreeSet<String>,
}

/// The requests the model's `step` makes Codex send the client, in a run of `mode`.
fn model_step_request(step: &ModelStep, mode: Mode) -> Option<&'static str> {
    match step {
        // With a scripted review the automatic reviewer answers; the client is not asked.
        ModelStep::Shell {
            escalate: true,
            review: None,
            ..
        } => Some("item/commandExecution/requestApproval"),
        ModelStep::ToolCall { name, .. } => match name.as_str() {
            "apply_patch" => Some("item/fileChange/requestApproval"),
            "request_user_input" if mode == Mode::Planning => Some("item/tool/requestUserInput"),
            "request_permissions" => Some("item/permissions/requestApproval"),
            DYNAMIC_TOOL => Some("item/tool/call"),
            _ => None,
        },
        _ => None,
    }
}

/// The notifications a server step sends on purpose (`all`: every notification of the release);
/// read from the fake's turn player (`fake_app_server::server::turn::server_actions`).
fn server_step_notifications(action: &ServerAction, all: &[&str]) -> Vec<String> {
    // An agent message: `item/started`, one `item/agentMessage/delta`, `item/completed`.
    const MESSAGE: &[&str] = &["item/started", "item/agentMessage/delta", "item/completed"];
    let named: Vec<&str> = match action {
        ServerAction::EveryNotification {} => all.to_vec(),
        ServerAction::Error { .. } => vec!["error"],
        ServerAction::ForeignTurn { of } => {
            let mut named = match of {
                ForeignScope::OtherThread => vec!["thread/started"],
                ForeignScope::SameThread => Vec::new(),
            };
            named.push("turn/started");
            named.extend(MESSAGE);
            named.push("turn/completed");
            named
        }
        ServerAction::StrayEvents {} => {
            let mut named = MESSAGE.to_vec();
            named.push("thread/status/changed");
            named
        }
        ServerAction::UnknownEnumValues {} => vec![
            "thread/status/changed",
            "item/started",
            "item/completed",
            "turn/plan/updated",
        ],
        ServerAction::LongLine { .. } | ServerAction::DeltaBurst { .. } => MESSAGE.to_vec(),
        // Answered requests are settled with `serverRequest/resolved`.
        ServerAction::Request { .. } => vec!["serverRequest/resolved"],
        _ => Vec::new(),
    };
    named.into_iter().map(str::to_string).collect()
}

fn sends(scenario: &Scenario, mode: Mode, all: &[&str]) -> CaseSends {
    let mut sent = CaseSends::default();
    for method in scenario.server_requests() {
        sent.requests.insert(method.to_string());
    }
    for turn in &scenario.turns {
        for step in &turn.steps {
            if let Some(method) = model_step_request(step, mode) {
                sent.requests.insert(method.to_string());
            }
            if let ModelStep::ToolCall { name, .. } = step {
                if name == "create_goal" || name == "update_goal" {
                    sent.notifications.insert("thread/goal/updated".into());
                }
            }
        }
        if turn.fail.as_ref().is_some_and(|f| f.error_notification) {
            sent.notifications.insert("error".into());
        }
        for step in &turn.server_steps {
            if let ServerAction::UnknownRequest { method } = &step.action {
                sent.requests.insert(method.clone());
            }
            sent.notifications
                .extend(server_step_notifications(&step.action, all));
        }
    }
    sent
}

fn scenario_of(reference: &str) -> Result<Scenario> {
    match ScenarioRef::parse(reference).map_err(|e| anyhow!(e))? {
        ScenarioRef::Builtin(name) => Ok(Scenario::builtin(&name)?),
        ScenarioRef::File(name) => {
            let text = suites::scenario_file(&name)
                .with_context(|| format!("scenario file `{name}` is not shipped"))?;
            Ok(Scenario::from_toml_str(text, std::path::Path::new(&name))?)
        }
    }
}

/// The protocol cases that exercise each server request and notification of a release.
pub(super) struct Exercised {
    /// Each server request of the release, and any no release has, with the cases sending it.
    pub(super) requests: BTreeMap<String, BTreeSet<CaseRef>>,
    /// Each notification of the release, with the cases sending it on purpose.
    pub(super) notifications: BTreeMap<String, BTreeSet<CaseRef>>,
    /// Every protocol case (`suite/case`).
    pub(super) case_names: BTreeSet<String>,
}

/// What the shipped protocol profile's cases send, of `protocol`'s requests and notifications
/// (`all_notifications`). A case whose scenario needs a request the release lacks is skipped.
pub(super) fn exercised(protocol: &Release, all_notifications: &[&str]) -> Result<Exercised> {
    let matrix = suites::load()?;
    let mut requests: BTreeMap<String, BTreeSet<CaseRef>> = protocol
        .server_requests()
        .map(|m| (m.to_string(), BTreeSet::new()))
        .collect();
    let mut notifications: BTreeMap<String, BTreeSet<CaseRef>> = all_notifications
        .iter()
        .map(|m| (m.to_string(), BTreeSet::new()))
        .collect();
    let mut case_names = BTreeSet::new();
    for (suite_name, suite) in &matrix.file.suites {
        if suite.profile != Profile::Protocol {
            continue;
        }
        for (case_name, case) in &suite.cases {
            case_names.insert(format!("{suite_name}/{case_name}"));
            let scenario = scenario_of(&case.scenario)
                .with_context(|| format!("case `{suite_name}.{case_name}`"))?;
            // A release without one of the scenario's requests cannot play it.
            if scenario
                .server_requests()
                .iter()
                .any(|m| !protocol.has_server_request(m))
            {
                continue;
            }
            let real_codex: BTreeSet<String> = matrix
                .cells
                .iter()
                .filter(|c| c.id.suite == *suite_name && c.id.case == *case_name)
                .filter(|c| c.runner.app_server == AppServerKind::Codex)
                .filter_map(|c| c.runner.codex_version.clone())
                .collect();
            let reference = CaseRef {
                case: format!("{suite_name}/{case_name}"),
                needs: case
                    .requires
                    .iter()
                    .map(|c| c.declaration().to_string())
                    .collect(),
                real_codex: real_codex.into_iter().collect(),
            };
            let sent = sends(&scenario, case.mode, all_notifications);
            for method in sent.requests {
                // A method no release has is the unknown-request case's; listed apart.
                requests
                    .entry(method)
                    .or_default()
                    .insert(reference.clone());
            }
            for method in sent.notifications {
                if let Some(cases) = notifications.get_mut(&method) {
                    cases.insert(reference.clone());
                }
            }
        }
    }
    Ok(Exercised {
        requests,
        notifications,
        case_names,
    })
}
