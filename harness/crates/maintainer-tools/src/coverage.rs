//! `harness coverage`: how much of a release's protocol the `protocol` profile exercises. For
//! each server request and notification of the release's schema (`graders::protocol`), the
//! cases whose scenario makes the app-server send it; for each client request of the release
//! (the fake's persona), whether the fake answers it and which case checks how drivers use it.
//!
//! What a case sends is read from its scenario, not from a run: the server steps' requests
//! ([`Scenario::server_requests`], the unknown request), the requests the model's steps make
//! Codex send (an escalated command, `apply_patch`, `request_user_input` in plan mode,
//! `request_permissions`, a dynamic tool; docs/scenarios.md), and the notifications a server
//! step sends on purpose (`every-notification`'s generated instance of every notification of the
//! release, an `error`, another thread's turn, a long line, …). Notifications every turn sends
//! (`turn/started`, `item/completed`, …) are counted where a case sends them on purpose; a run's
//! evidence shows them all.
//!
//! The targets: every server request of the release exercised by at least one case (those that
//! are not are listed with the reason), every notification sent in at least one case.

use anyhow::{anyhow, Result};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write;

pub mod by_driver;
mod by_driver_text;
mod sends;

/// How the coverage marks a server request no release has (the unknown-request case's).
pub(crate) const NO_RELEASE: &str = " (no release has it)";

/// How a driver's use of a client request is checked: the protocol cases that judge it (by the
/// request's method), beside the `thread/start` and `turn/start` every case's session needs.
const CLIENT_CHECKS: &[(&str, &[&str])] = &[
    (
        "initialize",
        &[
            "protocol-handshake/handshake",
            "protocol-control/initialize-error",
        ],
    ),
    ("thread/start", &["protocol-control/no-answer"]),
    (
        "turn/start",
        &[
            "protocol-control/turn-start-error",
            "protocol-binding/events-before-answer",
        ],
    ),
    ("turn/interrupt", &["protocol-control/interrupt"]),
    ("turn/steer", &["protocol-control/steer"]),
    (
        "thread/resume",
        &[
            "protocol-control/resume-error",
            "protocol-control/crash-resume",
            "protocol-control/crash-resume-forked",
        ],
    ),
];

/// A protocol case, as the coverage names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct CaseRef {
    /// `suite/case`.
    pub(crate) case: String,
    /// The declarations the case needs (a driver without them gets it as not applicable).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) needs: Vec<String>,
    /// The real-Codex versions the shipped matrix runs the case against.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) real_codex: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sent {
    pub(crate) method: String,
    pub(crate) cases: Vec<CaseRef>,
    /// Why no case sends it, when none does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) unexercised: Option<String>,
}

/// How the fake answers a client request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "how", content = "why")]
pub(crate) enum FakeAnswer {
    /// By behaviour (`fake_app_server::server`).
    Behaviour,
    /// With the release's recorded answer (`personas/VERSION/static_answers.json`).
    Recorded,
    /// Not implemented (`personas/VERSION/unimplemented.toml`): a -32603 error with the reason.
    Unimplemented(String),
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClientRequest {
    pub(crate) method: String,
    pub(crate) fake: FakeAnswer,
    pub(crate) checked_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Targets {
    pub(crate) server_requests: usize,
    pub(crate) server_requests_exercised: usize,
    pub(crate) notifications: usize,
    pub(crate) notifications_sent: usize,
    pub(crate) client_requests: usize,
    pub(crate) client_requests_the_fake_answers: usize,
    pub(crate) client_requests_checked: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    pub(crate) release: String,
    pub(crate) server_requests: Vec<Sent>,
    pub(crate) notifications: Vec<Sent>,
    /// `None` when the fake has no persona of the release.
    pub(crate) client_requests: Option<Vec<ClientRequest>>,
    pub(crate) targets: Targets,
}

/// The coverage of `release` (a version `graders::protocol` has data for) by the shipped
/// protocol profile.
pub fn coverage(release: &str) -> Result<Coverage> {
    let protocol = graders::protocol::release(release).map_err(|e| anyhow!("{e}"))?;
    let all_notifications: Vec<&str> = protocol.notifications().collect();
    let exercised = sends::exercised(protocol, &all_notifications)?;
    let server_requests: Vec<Sent> = exercised
        .requests
        .into_iter()
        .map(|(method, cases)| {
            let known = protocol.has_server_request(&method);
            let unexercised = cases
                .is_empty()
                .then(|| "no case's scenario sends it".to_string());
            Sent {
                method: if known {
                    method
                } else {
                    format!("{method}{NO_RELEASE}")
                },
                cases: cases.into_iter().collect(),
                unexercised,
            }
        })
        .collect();
    let notifications: Vec<Sent> = exercised
        .notifications
        .into_iter()
        .map(|(method, cases)| Sent {
            unexercised: cases
                .is_empty()
                .then(|| "no case's scenario sends it on purpose".to_string()),
            method,
            cases: cases.into_iter().collect(),
        })
        .collect();
    let client_requests = client_requests(release, &exercised.case_names);
    let targets = Targets::of(protocol, &server_requests, &notifications, &client_requests);
    Ok(Coverage {
        release: protocol.version().to_string(),
        server_requests,
        notifications,
        client_requests,
        targets,
    })
}

/// The client requests of `release`'s persona: how the fake answers each, and which of the
/// protocol cases (`case_names`) check how drivers use it. `None` when the fake has no persona
/// of the release.
fn client_requests(release: &str, case_names: &BTreeSet<String>) -> Option<Vec<ClientRequest>> {
    fake_app_server::persona::find(release).ok().map(|persona| {
        persona
            .client_methods()
            .map(|method| {
                let fake = if let Some(why) = persona.unimplemented_reason(method) {
                    FakeAnswer::Unimplemented(why.to_string())
                } else if persona.static_answer(method).is_some() {
                    FakeAnswer::Recorded
                } else {
                    FakeAnswer::Behaviour
                };
                let checked_by = CLIENT_CHECKS
                    .iter()
                    .find(|(m, _)| *m == method)
                    .map(|(_, cases)| {
                        cases
                            .iter()
                            .filter(|c| case_names.contains(**c))
                            .map(|c| c.to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                ClientRequest {
                    method: method.to_string(),
                    fake,
                    checked_by,
                }
            })
            .collect::<Vec<_>>()
    })
}

impl Targets {
    /// The counts the targets are read by.
    fn of(
        protocol: &graders::protocol::Release,
        server_requests: &[Sent],
        notifications: &[Sent],
        client_requests: &Option<Vec<ClientRequest>>,
    ) -> Targets {
        let known_requests: Vec<&Sent> = server_requests
            .iter()
            .filter(|s| protocol.has_server_request(&s.method))
            .collect();
        Targets {
            server_requests: known_requests.len(),
            server_requests_exercised: known_requests
                .iter()
                .filter(|s| !s.cases.is_empty())
                .count(),
            notifications: notifications.len(),
            notifications_sent: notifications.iter().filter(|s| !s.cases.is_empty()).count(),
            client_requests: client_requests.as_ref().map_or(0, Vec::len),
            client_requests_the_fake_answers: client_requests.as_ref().map_or(0, |c| {
                c.iter()
                    .filter(|r| !matches!(r.fake, FakeAnswer::Unimplemented(_)))
                    .count()
            }),
            client_requests_checked: client_requests
                .as_ref()
                .map_or(0, |c| c.iter().filter(|r| !r.checked_by.is_empty()).count()),
        }
    }
}

fn case_list(cases: &[CaseRef]) -> String {
    cases
        .iter()
        .map(|c| {
            let mut text = format!("`{}`", c.case);
            if !c.needs.is_empty() {
                let _ = write!(text, " (needs {})", c.needs.join(", "));
            }
            if !c.real_codex.is_empty() {
                let _ = write!(text, " (also real Codex {})", c.real_codex.join(", "));
            }
            text
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Coverage {
    /// The targets in one paragraph.
    fn target_lines(&self) -> Vec<String> {
        let t = &self.targets;
        let mut lines = vec![
            format!(
                "server requests: {} of {} exercised by at least one case{}",
                t.server_requests_exercised,
                t.server_requests,
                if t.server_requests_exercised == t.server_requests {
                    " (none unreachable)"
                } else {
                    ""
                }
            ),
            format!(
                "notifications: {} of {} sent in at least one case",
                t.notifications_sent, t.notifications
            ),
        ];
        if self.client_requests.is_some() {
            lines.push(format!(
                "client requests: the fake answers {} of {} as the release does; {} are checked by a case",
                t.client_requests_the_fake_answers, t.client_requests, t.client_requests_checked
            ));
        } else {
            lines.push(format!(
                "client requests: the fake has no persona of {} (it plays {})",
                self.release,
                fake_app_server::persona::versions().join(", ")
            ));
        }
        lines
    }

    /// The Markdown section (docs/coverage.md, the CI job summary).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## Protocol coverage of Codex {}\n", self.release);
        for line in self.target_lines() {
            let _ = writeln!(out, "- {line}");
        }
        let _ = writeln!(out, "\n### Server requests\n");
        let _ = writeln!(out, "| request | cases that make the app-server send it |");
        let _ = writeln!(out, "| --- | --- |");
        for sent in &self.server_requests {
            let cases = match &sent.unexercised {
                Some(why) => format!("**none**: {why}"),
                None => case_list(&sent.cases),
            };
            let _ = writeln!(out, "| `{}` | {cases} |", sent.method);
        }
        let _ = writeln!(out, "\n### Notifications\n");
        let _ = writeln!(out, "| notification | cases that send it on purpose |");
        let _ = writeln!(out, "| --- | --- |");
        for sent in &self.notifications {
            let cases = match &sent.unexercised {
                Some(why) => format!("**none**: {why}"),
                None => case_list(&sent.cases),
            };
            let _ = writeln!(out, "| `{}` | {cases} |", sent.method);
        }
        if let Some(client) = &self.client_requests {
            let _ = writeln!(out, "\n### Client requests\n");
            let _ = writeln!(out, "| request | the fake answers | checked by |");
            let _ = writeln!(out, "| --- | --- | --- |");
            for request in client {
                let fake = match &request.fake {
                    FakeAnswer::Behaviour => "by behaviour".to_string(),
                    FakeAnswer::Recorded => "the release's recorded answer".to_string(),
                    FakeAnswer::Unimplemented(why) => {
                        format!("no (-32603): {}", why.replace('|', "\\|"))
                    }
                };
                let checked = if request.checked_by.is_empty() {
                    "—".to_string()
                } else {
                    request
                        .checked_by
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(out, "| `{}` | {fake} | {checked} |", request.method);
            }
        }
        out
    }

    /// The terminal table: the targets, then one line per method.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Protocol coverage of Codex {}", self.release);
        for line in self.target_lines() {
            let _ = writeln!(out, "  {line}");
        }
        let width = self
            .server_requests
            .iter()
            .chain(&self.notifications)
            .map(|s| s.method.len())
            .max()
            .unwrap_or(0);
        for (title, rows) in [
            ("server requests", &self.server_requests),
            ("notifications", &self.notifications),
        ] {
            let _ = writeln!(out, "\n{title}:");
            for sent in rows {
                let cases = match &sent.unexercised {
                    Some(why) => format!("NONE ({why})"),
                    None => sent
                        .cases
                        .iter()
                        .map(|c| {
                            if c.real_codex.is_empty() {
                                c.case.clone()
                            } else {
                                format!("{}+codex", c.case)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                let _ = writeln!(out, "  {:width$}  {cases}", sent.method);
            }
        }
        if let Some(client) = &self.client_requests {
            let _ = writeln!(out, "\nclient requests:");
            let width = client.iter().map(|c| c.method.len()).max().unwrap_or(0);
            for request in client {
                let fake = match &request.fake {
                    FakeAnswer::Behaviour => "behaviour",
                    FakeAnswer::Recorded => "recorded",
                    FakeAnswer::Unimplemented(_) => "-32603",
                };
                let _ = writeln!(
                    out,
                    "  {:width$}  {fake:9}  {}",
                    request.method,
                    request.checked_by.join(" ")
                );
            }
        }
        out
    }
}

/// The generated part of docs/coverage.md begins and ends with these lines.
#[cfg(test)]
const DOC_BEGIN: &str = "<!-- coverage: generated by `UPDATE_COVERAGE_DOC=1 cargo test -p maintainer-tools --lib coverage`; do not edit by hand -->";
#[cfg(test)]
const DOC_END: &str = "<!-- end of the generated coverage -->";
/// The releases docs/coverage.md covers: the pin the fake plays, and the newest release it plays.
#[cfg(test)]
const DOC_RELEASES: &[&str] = &["0.169.0", "0.171.0"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_request_and_notification_of_the_pinned_releases_is_exercised() {
        for release in DOC_RELEASES {
            let coverage = coverage(release).unwrap();
            let t = &coverage.targets;
            let unexercised: Vec<&str> = coverage
                .server_requests
                .iter()
                .filter(|s| s.cases.is_empty())
                .map(|s| s.method.as_str())
                .collect();
            assert!(unexercised.is_empty(), "{release}: {unexercised:?}");
            assert_eq!(t.server_requests_exercised, t.server_requests, "{release}");
            assert_eq!(t.notifications_sent, t.notifications, "{release}");
            assert!(
                t.server_requests >= 10 && t.notifications >= 86,
                "{release}: {t:?}"
            );
        }
        let pinned = coverage("0.169.0").unwrap();
        let cases_of = |method: &str| -> Vec<String> {
            pinned
                .server_requests
                .iter()
                .find(|s| s.method == method)
                .unwrap()
                .cases
                .iter()
                .map(|c| c.case.clone())
                .collect()
        };
        // A model step's request (an escalated command) and a server step's (MCP elicitation).
        assert!(cases_of("item/commandExecution/requestApproval")
            .contains(&"protocol-safe-default/command-escalation-refused".to_string()));
        assert_eq!(
            cases_of("mcpServer/elicitation/request"),
            ["protocol-server-requests/mcp-elicitation"]
        );
        assert_eq!(
            cases_of("item/tool/requestUserInput"),
            ["protocol-server-requests/user-input"],
            "plan mode only"
        );
        let newer = coverage("0.171.0").unwrap();
        assert!(
            !newer
                .server_requests
                .iter()
                .any(|s| s.method == "currentTime/read"),
            "0.171 has no currentTime/read, and current-time cannot play there"
        );
        let client = pinned.client_requests.unwrap();
        let interrupt = client
            .iter()
            .find(|c| c.method == "turn/interrupt")
            .unwrap();
        assert_eq!(interrupt.fake, FakeAnswer::Behaviour);
        assert_eq!(interrupt.checked_by, ["protocol-control/interrupt"]);
        assert!(client
            .iter()
            .any(|c| matches!(c.fake, FakeAnswer::Unimplemented(_))));
        assert!(
            coverage("0.160.0").unwrap().client_requests.is_none(),
            "no persona"
        );
    }

    /// docs/coverage.md holds the generated coverage of [`DOC_RELEASES`].
    #[test]
    fn docs_coverage_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/coverage.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (head, rest) = page.split_once(DOC_BEGIN).expect("the begin marker");
        let (_, tail) = rest.split_once(DOC_END).expect("the end marker");
        let generated: Vec<String> = DOC_RELEASES
            .iter()
            .map(|release| coverage(release).unwrap().markdown())
            .collect();
        let wanted = format!(
            "{head}{DOC_BEGIN}\n\n{}\n{DOC_END}{tail}",
            generated.join("\n")
        );
        if std::env::var_os("UPDATE_COVERAGE_DOC").is_some() {
            std::fs::write(&path, &wanted).unwrap();
        } else {
            assert!(
                page == wanted,
                "docs/coverage.md is out of date: run UPDATE_COVERAGE_DOC=1 cargo test -p maintainer-tools --lib coverage and review the diff"
            );
        }
    }
}
