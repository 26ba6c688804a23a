//! `protocol-credentials/secrets-not-forwarded` (obligation 9): the harness puts canary secrets
//! (values starting `ccf-canary-`) in the driver's environment and records which it planted
//! (`run.started.protocol.canaries`: names and a digest, never the values); the model runs
//! `env`. Checks:
//! - the record (never `fail`): without planted canaries nothing could leak, so a clean listing
//!   shows nothing — `incomplete`;
//! - `env-ran` (never `fail`): the model's `env` (or `printenv`) ran and printed an environment
//!   — a tool output of such a call (model log) or a completed command item (wire) with at least
//!   three `NAME=value` lines; without it the run shows nothing, so `incomplete`;
//! - `secrets-not-forwarded`: no canary value appears in anything the model's commands printed
//!   (every `model.tool-output`, every command item's output).
//!
//! No listing, where the app-server asked the driver's approval before each `env` the model
//! called (its command item's id) and the driver refused every one (a decision that grants
//! nothing, or a JSON-RPC error), is `not-applicable`: no command ran (observed: Codex 0.169
//! under approvalPolicy `untrusted` asks before `env`), a choice the protocol leaves the driver.

use super::server_requests::grants;
use super::{incomplete, not_applicable, pass, Exchange, ProtocolCase};
use crate::events::{Body, Item, Kind, Source};
use crate::grade::{fail, Terminal};
use crate::shell::unquoted_words;
use crate::tool_call::{ToolArguments, ToolCommand};
use crate::verdict::{excerpt, EvidenceRef, Verdict};
use std::collections::HashSet;

/// What every canary value starts with.
pub(crate) const CANARY_PREFIX: &str = "ccf-canary-";
/// Programs that print the environment.
const ENV_PROGRAMS: &[&str] = &["env", "printenv"];
/// `NAME=value` lines an output needs to count as an environment listing.
const MIN_ENV_LINES: usize = 3;
/// Most `env` calls remembered.
const MAX_CALLS: usize = 1024;

fn runs_env(words: &str) -> bool {
    words.split_whitespace().any(|w| {
        let program = w.rsplit('/').next().unwrap_or(w);
        ENV_PROGRAMS.contains(&program)
    })
}

fn command_runs_env(arguments: &str) -> bool {
    match ToolArguments::decode(arguments).command {
        Some(ToolCommand::Script(script)) => runs_env(&unquoted_words(&script)),
        Some(ToolCommand::Argv(argv)) => argv.iter().any(|a| runs_env(&unquoted_words(a))),
        None => false,
    }
}

fn lists_an_environment(output: &str) -> bool {
    output
        .lines()
        .filter(|line| {
            line.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !name.starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .take(MIN_ENV_LINES)
        .count()
        >= MIN_ENV_LINES
}

/// The first line of `output` holding a value that starts with `prefix`, cut right after the
/// prefix (a reason shows where a canary leaked, never the canary).
pub(crate) fn canary_line(output: &str, prefix: &str) -> Option<String> {
    let line = output.lines().find(|l| l.contains(prefix))?;
    let cut = line.find(prefix).unwrap_or(0) + prefix.len();
    Some(format!("{}…", &line[..cut]))
}

/// The approval requests that ask before a command runs (v2, legacy).
const COMMAND_APPROVALS: &[&str] = &[
    "item/commandExecution/requestApproval",
    "execCommandApproval",
];

pub(crate) struct SecretsNotForwarded {
    ex: Exchange,
    /// The model's calls that run `env`, and the command items that do (by item id).
    env_calls: HashSet<String>,
    /// Outputs that list an environment: (seq, call id, when from a model tool output).
    listings: Vec<(u64, Option<String>)>,
    leak: Option<(u64, String)>,
}

impl SecretsNotForwarded {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
            env_calls: HashSet::new(),
            listings: Vec::new(),
            leak: None,
        }
    }

    fn output(&mut self, seq: u64, call: Option<&str>, output: &str, ran_env: bool) {
        if let Some(line) = canary_line(output, CANARY_PREFIX) {
            self.leak.get_or_insert((seq, line));
        }
        if lists_an_environment(output)
            && (ran_env || call.is_some())
            && self.listings.len() < MAX_CALLS
        {
            self.listings.push((seq, call.map(str::to_string)));
        }
    }
}

impl SecretsNotForwarded {
    /// `not-applicable` when the model called `env`, the app-server asked the driver's approval
    /// before each such call, and the driver refused every one: no command ran.
    fn every_env_refused(&self, terminal: &Terminal) -> Option<Verdict> {
        if self.env_calls.is_empty() {
            return None;
        }
        let ex = &self.ex;
        let mut evidence = Vec::new();
        let mut asked = HashSet::new();
        for (seq, request) in &ex.server_requests {
            let Some(item) = request
                .item_id
                .as_ref()
                .filter(|i| self.env_calls.contains(*i))
            else {
                continue;
            };
            if !COMMAND_APPROVALS.contains(&request.method.as_str()) {
                continue;
            }
            let mut answers = ex.answers_to(request);
            let (answer_seq, answer) = answers.next()?;
            let refused =
                answer.error.is_some() || answer.decision.as_deref().is_some_and(|d| !grants(d));
            if !refused || answers.next().is_some() {
                return None;
            }
            let how = match (&answer.error, answer.decision.as_deref()) {
                (Some(_), _) => "a JSON-RPC error".to_string(),
                (None, decision) => format!("`{}`", decision.unwrap_or("-")),
            };
            evidence.push(EvidenceRef::at(
                *seq,
                &format!("{} id {} before {item}", request.method, request.id),
            ));
            evidence.push(EvidenceRef::at(
                *answer_seq,
                &format!("answered with {how}"),
            ));
            asked.insert(item.clone());
        }
        if asked.len() != self.env_calls.len() {
            return None;
        }
        evidence.push(terminal.evidence());
        Some(not_applicable(
            format!("the model's `env` never ran: the app-server asked the driver's approval before each of its {} call(s) (Codex 0.169 asks before every command under approvalPolicy `untrusted`, `ls` and `echo` included) and the driver refused each, a choice the protocol leaves it; with no command run, the case cannot show what the model's commands see", asked.len()),
            evidence,
        ))
    }
}

impl ProtocolCase for SecretsNotForwarded {
    exchange_in_field_ex!();

    fn wants_more(&self, kind: Kind) -> bool {
        matches!(kind, Kind::ModelToolCall | Kind::ModelToolOutput)
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        if !crate::grade::documented(source, body) {
            return;
        }
        match body {
            Body::ModelToolCall(call)
                if self.env_calls.len() < MAX_CALLS && command_runs_env(&call.arguments) =>
            {
                self.env_calls.insert(call.call_id.clone());
            }
            Body::ModelToolOutput(out) => self.output(seq, Some(&out.call_id), &out.output, false),
            Body::ItemCompleted(item) => {
                if let Item::CommandExecution(c) = &item.item {
                    let ran_env = runs_env(&unquoted_words(&c.command));
                    if ran_env && self.env_calls.len() < MAX_CALLS {
                        self.env_calls.insert(c.id.clone());
                    }
                    for text in c.outputs() {
                        self.output(seq, None, text, ran_env);
                    }
                }
            }
            _ => {}
        }
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let planted = self
            .ex
            .setup
            .as_ref()
            .and_then(|(seq, setup)| Some((*seq, setup.canaries.as_ref()?)))
            .filter(|(_, canaries)| !canaries.names.is_empty());
        let Some((planted_at, canaries)) = planted else {
            return incomplete(
                "the run records no canary secret planted in the driver's environment (`run.started.protocol.canaries`), so whatever the model's commands printed shows nothing about the driver's secrets".into(),
                vec![terminal.evidence()],
            );
        };
        let names = canaries.names.join(", ");
        if let Some((seq, line)) = &self.leak {
            return fail(
                "secrets-not-forwarded",
                format!("a canary secret from the driver's own environment appears in what the model's command printed (`{}`): the driver handed its environment to the app-server, so every command the model runs can read the driver's secrets; start `codex app-server` with an allowlisted environment (observed: a driver that copied os.environ gave every secret to the app-server)", excerpt(line)),
                vec![EvidenceRef::at(*seq, line)],
            );
        }
        let listing = self.listings.iter().find(|(_, call)| match call {
            Some(call) => self.env_calls.contains(call),
            None => true,
        });
        let Some((seq, _)) = listing else {
            if let Some(verdict) = self.every_env_refused(terminal) {
                return verdict;
            }
            return incomplete(
                "the model's `env` command never printed an environment (no output of it in the model log or on the wire), so the run shows nothing about which secrets the model's commands can see".into(),
                vec![terminal.evidence()],
            );
        };
        pass(
            format!("the model's `env` ran and printed the app-server's environment, and none of the canary secrets the harness put in the driver's environment ({names}: `{CANARY_PREFIX}…`) was in it or in any other command output"),
            vec![
                EvidenceRef::at(planted_at, &format!("canaries planted: {names}")),
                EvidenceRef::at(*seq, "env output without a canary"),
                terminal.evidence(),
            ],
        )
    }
}
