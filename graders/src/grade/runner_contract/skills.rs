//! `skills`: the runner contract's context boundary.
//!
//! - `explicit-skill`: every `turn/start` whose text names a skill (`$name` / `/name`,
//!   [`super::skill_references`]) carries, beside that text, Codex's structured input
//!   `{type: "skill", name, path}` for it (`skill-input`), its path inside the app-server's Codex
//!   home as its `initialize` answer reports it (`skill-path`: the isolated home's skill, not
//!   another copy); the thread configuration's `skills.include_instructions` is forwarded on
//!   `thread/start` and on every `thread/resume`, as the task's `true`
//!   (`skill-instructions-forwarded`; a run that never resumes shows nothing of it:
//!   `incomplete`); the session goes on.
//! - `skillless`: `thread/start` and every `thread/resume` switch skill instructions off
//!   (`skill-instructions-off`), every session reports an empty instruction-source list
//!   (`instruction-sources-empty`), every turn's input is one text part and nothing else
//!   (`one-text-input`); the session goes on.

use super::super::protocol::{incomplete, pass, Exchange, ProtocolCase};
use super::skill_references;
use crate::events::{Body, ClientRequest, Kind, Source};
use crate::grade::{documented, fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};
use std::path::Path;

const RULE: &str = "runner contract, context boundary";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SkillsCase {
    Explicit,
    Skillless,
}

pub(crate) struct Skills {
    ex: Exchange,
    case: SkillsCase,
    /// Each session's instruction sources, as the app-server reported them.
    sources: Vec<(u64, Vec<String>)>,
}

impl Skills {
    pub(crate) fn new(case: SkillsCase) -> Self {
        Self {
            ex: Exchange::default(),
            case,
            sources: Vec::new(),
        }
    }

    /// The thread openers, each with the `skills.include_instructions` it carried.
    fn openers(&self) -> Vec<&(u64, ClientRequest)> {
        self.ex
            .client_requests
            .iter()
            .filter(|(_, r)| matches!(r.method.as_str(), "thread/start" | "thread/resume"))
            .collect()
    }

    fn turns(&self) -> impl Iterator<Item = &(u64, ClientRequest)> {
        self.ex
            .client_requests
            .iter()
            .filter(|(_, r)| r.method == "turn/start")
    }

    /// Every thread opener carries `skills.include_instructions = expected`, at least one
    /// `thread/resume` among them when `resume_needed`.
    fn forwarded(&self, expected: bool, check: &str, resume_needed: bool) -> Result<(), Verdict> {
        let openers = self.openers();
        if openers.is_empty() {
            return Err(incomplete("the driver opened no thread".into(), vec![]));
        }
        if resume_needed && !openers.iter().any(|(_, r)| r.method == "thread/resume") {
            return Err(incomplete(
                "the driver never resumed its thread, so the run shows nothing of what it forwards on thread/resume".into(),
                openers.iter().map(|(seq, r)| EvidenceRef::at(*seq, &r.method)).collect(),
            ));
        }
        for (seq, opener) in openers {
            let carried = opener.skill_instructions.as_ref();
            if carried != Some(&serde_json::Value::Bool(expected)) {
                return Err(fail(
                    check,
                    format!(
                        "the driver's {} carried skills.include_instructions {}, not the run's {expected}: the {RULE} forwards includeSkillInstructions on both thread/start and thread/resume (the thread configuration's `skills.include_instructions`), so a resumed thread neither regains nor loses skill instructions",
                        opener.method,
                        carried.map_or("(none)".to_string(), |v| v.to_string())
                    ),
                    vec![EvidenceRef::at(*seq, &opener.method)],
                ));
            }
        }
        Ok(())
    }

    fn explicit(&self, terminal: &Terminal) -> Verdict {
        let mut evidence = Vec::new();
        let mut asked = 0;
        for (seq, turn) in self.turns() {
            let texts: Vec<&str> = turn
                .inputs
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect();
            let names: Vec<String> = texts.iter().flat_map(|t| skill_references(t)).collect();
            if names.is_empty() {
                continue;
            }
            asked += 1;
            let Some(home) = self.codex_home(turn.launch) else {
                return incomplete(
                    format!("the app-server of launch {} reported no Codex home in its initialize answer, so where its skills live is not known", turn.launch),
                    vec![EvidenceRef::at(*seq, "turn/start")],
                );
            };
            for name in names {
                let given = turn
                    .inputs
                    .iter()
                    .find(|p| p.kind == "skill" && p.name.as_deref() == Some(&name));
                let Some(given) = given else {
                    return fail(
                        "skill-input",
                        format!("the driver's turn/start names the skill `{name}` in its text but carries no structured skill input for it: the {RULE} gives every turn that asks for a skill Codex's `{{type: \"skill\", name, path}}` input (UserInput, SkillUserInput) beside the text"),
                        vec![EvidenceRef::at(*seq, &format!("turn/start names ${name}"))],
                    );
                };
                let path = given.path.as_deref().unwrap_or("");
                if !Path::new(path).starts_with(home) {
                    return fail(
                        "skill-path",
                        format!("the driver's skill input for `{name}` points at `{path}`, outside the app-server's Codex home {home}: the {RULE} maps an explicit skill to the isolated Codex home's copy"),
                        vec![EvidenceRef::at(*seq, &format!("skill {name} at {path}"))],
                    );
                }
                evidence.push(EvidenceRef::at(*seq, &format!("skill {name} at {path}")));
            }
        }
        if asked == 0 {
            return incomplete(
                "no turn of the driver names a skill in its text, so the case shows nothing about skill inputs".into(),
                vec![terminal.evidence()],
            );
        }
        if let Err(v) = self.forwarded(true, "skill-instructions-forwarded", true) {
            return v;
        }
        self.went_on(
            format!("every one of the {asked} turns that names a skill carries its structured input from the isolated Codex home beside the text, and skills.include_instructions = true went on thread/start and thread/resume"),
            evidence,
            terminal,
        )
    }

    /// The Codex home the `initialize` answer of `launch` reported.
    fn codex_home(&self, launch: u64) -> Option<&str> {
        self.ex
            .client_answers
            .iter()
            .find(|(_, a)| a.launch == launch && a.method == "initialize")
            .and_then(|(_, a)| a.codex_home.as_deref())
    }

    fn skillless(&self, terminal: &Terminal) -> Verdict {
        if let Err(v) = self.forwarded(false, "skill-instructions-off", false) {
            return v;
        }
        if self.sources.is_empty() {
            return incomplete(
                "no session started, so no instruction-source list was reported".into(),
                vec![terminal.evidence()],
            );
        }
        if let Some((seq, listed)) = self.sources.iter().find(|(_, s)| !s.is_empty()) {
            return fail(
                "instruction-sources-empty",
                format!("the thread reported the instruction sources {listed:?}: the {RULE} keeps automatic instruction blocks (skills, apps, project instruction files) out of a skillless run, so the returned instruction-source list must be empty"),
                vec![EvidenceRef::at(*seq, "session.started instruction_sources")],
            );
        }
        for (seq, turn) in self.turns() {
            let one_text = turn.inputs.len() == 1 && turn.inputs[0].kind == "text";
            if !one_text {
                let kinds: Vec<&str> = turn.inputs.iter().map(|p| p.kind.as_str()).collect();
                return fail(
                    "one-text-input",
                    format!("the driver's turn/start carried the input parts {kinds:?}: in a skillless run the model gets one text input (the {RULE})"),
                    vec![EvidenceRef::at(*seq, "turn/start")],
                );
            }
        }
        self.went_on(
            "skill instructions were off on every thread opener, the thread reported no instruction source and every turn was one text input".into(),
            vec![],
            terminal,
        )
    }

    fn went_on(
        &self,
        what: String,
        mut evidence: Vec<EvidenceRef>,
        terminal: &Terminal,
    ) -> Verdict {
        match self.ex.session_went_on() {
            Ok(went_on) => {
                evidence.extend(went_on.evidence());
                pass(format!("{what}; {}", went_on.describe()), evidence)
            }
            Err(fault) => fault.verdict(&what, terminal),
        }
    }
}

impl ProtocolCase for Skills {
    fn exchange(&self) -> &Exchange {
        &self.ex
    }

    fn exchange_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn wants_more(&self, kind: Kind) -> bool {
        kind == Kind::SessionStarted
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        if let Body::SessionStarted(s) = body {
            if documented(source, body) {
                self.sources
                    .push((seq, s.sandbox.instruction_sources.clone()));
            }
        }
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        match self.case {
            SkillsCase::Explicit => self.explicit(terminal),
            SkillsCase::Skillless => self.skillless(terminal),
        }
    }
}
