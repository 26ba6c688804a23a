//! Differential fidelity: the fake app-server and the real Codex play the same scenario through
//! the same reference driver, in the same environment; they must reach the same verdict and the
//! driver must have seen the same sequence of messages once ids, paths and probe ids are
//! normalised.
//!
//! "Messages the driver saw" are the driver's own events (`source = driver`): every app-server
//! message the driver acts on, reduced by the driver. By construction this leaves out the
//! notifications the driver ignores: `thread/status/changed`, `thread/tokenUsage/updated`,
//! `account/rateLimits/updated`, `item/agentMessage/delta` and `item/plan/delta` (the fake
//! streams these exactly as Codex does when the model streams the script's line chunks, but
//! the driver only reads the items), `remoteControl/status/changed`, `thread/settings/updated`,
//! and Codex's `warning` about the mock model's missing metadata. Of the driver's events,
//! `diagnostic` is not compared (free text about processes, e.g. stderr lines, which differ by
//! construction). Beyond ids, paths and probe ids, one thing is normalised: the line order of a
//! command's aggregated output (see `order_output_lines`). One thing is compared as a prefix: a
//! sequence that ends because its driver, its task done, hung up on the app-server with requests
//! unanswered (codex-acp's title side thread; see [`cut`]) must match the other side up to
//! there; where the two drivers, both ended on their own, still closed stdin at different places,
//! the pair is compared up to the earlier close, then the app-servers' and drivers' exits; the
//! table says where the comparison stopped.
//!
//! Ids are normalised, so how an app-server makes them is compared apart: per item type, the
//! shapes of the ids in both transcripts ([`wire`]; 0.171 gives a plan item a UUID
//! of its own where 0.169 wrote `<turnId>-plan`). Ids the model API makes (`call_…`, `msg_…`)
//! are the scenario's, not the app-server's, and count as one shape.
//!
//! What the driver sent back is compared too ([`sent`]): every line from the driver to the
//! app-server, normalised, must be the same on both sides (a prefix where the driver cut a side
//! short).
//!
//! What the app-server answered to the driver's requests is compared too ([`answers`]), every
//! launch of the cell: a differing answer is named first, by method and field path with both
//! values, since it is why a driver goes on otherwise. A sequence is compared through every
//! launch: only a close in the last launch, the same on both sides, ends it early ([`cut`]).
//!
//! A real Codex is compared with the fake that plays its release (a runner's `plays`), else with
//! the fake that plays the pin.

pub mod answers;
pub(crate) mod cut;
pub mod field_diff;
mod normalise;
pub(crate) mod sent;
mod side;
pub(crate) mod wire;

#[cfg(test)]
use normalise::normalise;
pub(crate) use normalise::normalise_with;
use side::side_outcome;

use codex::mock_api::MockScript;
use report::layout::CellEvidence;
use report::outcome::CellResult;
use serde_json::Value;
use std::path::Path;
use suites::spec::{AppServerKind, RunnerSpec};
use suites::{Cell, Matrix};

/// Whether `fake` plays the same client as `real` against the fake app-server: the same driver
/// (kind, command line, declared driver) under the same launch policy. Read from the matrix, so
/// a new real-Codex runner (a new Codex version) is compared without code changes.
pub(crate) fn is_fake_counterpart(fake: &RunnerSpec, real: &RunnerSpec) -> bool {
    fake.app_server == AppServerKind::Fake
        && fake.driver == real.driver
        && fake.policy == real.policy
        && fake.driver_cmd == real.driver_cmd
        && fake.declared == real.declared
}

/// A fake cell and a real-Codex cell that play the same scenario in the same environment.
#[derive(Debug, Clone)]
pub struct Pair {
    pub fake: Cell,
    pub real: Cell,
}

impl Pair {
    /// `suite.environment.case` with both runners.
    pub fn name(&self) -> String {
        format!(
            "{}.{}~{}.{}.{}",
            self.real.id.suite,
            self.fake.id.runner,
            self.real.id.runner,
            self.real.id.environment,
            self.real.id.case
        )
    }

    pub fn scenario(&self) -> &str {
        &self.real.case.scenario
    }
}

/// The Codex release a fake runner plays.
pub fn plays(fake: &RunnerSpec) -> &str {
    fake.plays
        .as_deref()
        .unwrap_or(fake_app_server::persona::DEFAULT_VERSION)
}

/// Every pair of the matrix whose cells match one of `filters` (all when empty): the real cell's
/// runner has a fake counterpart in the same suite, environment and case (the one playing its
/// release, else the one playing the pin); the case plays the same scenario for both (no
/// `codex_scenario` override) and the real Codex can play it.
pub fn pairs(matrix: &Matrix, filters: &[String]) -> Vec<Pair> {
    let mut out = Vec::new();
    for real in &matrix.cells {
        if real.runner.app_server != AppServerKind::Codex || real.case.codex_scenario.is_some() {
            continue;
        }
        let counterparts: Vec<&Cell> = matrix
            .cells
            .iter()
            .filter(|c| {
                c.id.suite == real.id.suite
                    && c.id.environment == real.id.environment
                    && c.id.case == real.id.case
                    && is_fake_counterpart(&c.runner, &real.runner)
            })
            .collect();
        let release = real.runner.codex_version.as_deref();
        let Some(fake) = counterparts
            .iter()
            .find(|c| Some(plays(&c.runner)) == release)
            .or_else(|| counterparts.iter().find(|c| c.runner.plays.is_none()))
            .copied()
        else {
            continue;
        };
        // A case the driver cannot express runs on neither side: nothing to compare.
        if real.not_applicable.is_some() || fake.not_applicable.is_some() {
            continue;
        }
        if !playable(&real.case.scenario)
            || NOT_PAIRED.iter().any(|(case, _)| *case == real.id.case)
        {
            continue;
        }
        let pair = Pair {
            fake: fake.clone(),
            real: real.clone(),
        };
        let name = pair.name();
        if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
            out.push(pair);
        }
    }
    out
}

/// Cases whose sequences differ between the fake and the real Codex by construction, with why.
const NOT_PAIRED: &[(&str, &str)] = &[(
    "secrets-not-forwarded",
    "the model's command prints its whole environment: the real Codex adds its own CODEX_* \
     variables (session and thread ids among them), the fake its bundled bubblewrap's path",
)];

fn playable(scenario: &str) -> bool {
    let Some(name) = scenario.strip_prefix("builtin:") else {
        return suites::spec::ScenarioRef::parse(scenario)
            .ok()
            .and_then(|r| match r {
                suites::spec::ScenarioRef::File(name) => suites::scenario_file(&name),
                _ => None,
            })
            .and_then(|text| {
                fake_app_server::scenario::Scenario::from_toml_str(
                    text,
                    std::path::Path::new(scenario),
                )
                .ok()
            })
            .is_some_and(|s| MockScript::from_scenario(&s).is_ok());
    };
    fake_app_server::scenario::Scenario::builtin(name)
        .ok()
        .is_some_and(|s| MockScript::from_scenario(&s).is_ok())
}

/// Folders that differ between the two runners by construction, each with its placeholder, most
/// specific (longest) first: the app-server's CODEX_HOME, HOME and install folder, and the cell
/// folder. Longest first, so a folder below another one keeps its own name (the fake's install
/// folder is the harness binary's, which may hold `--out`).
pub(crate) fn side_aliases(
    cell_root: &Path,
    real: Option<&Path>,
    fake_program: &Path,
) -> Vec<(String, String)> {
    let show = |p: &Path| p.display().to_string();
    let evidence = CellEvidence::new(cell_root);
    let mut aliases = match real {
        Some(install_dir) => vec![
            (
                show(&evidence.codex().join("home").join(".codex")),
                "<codex-home>".into(),
            ),
            (show(&evidence.codex().join("home")), "<home>".into()),
            (show(install_dir), "<app-server-install>".into()),
        ],
        None => vec![
            (show(&evidence.home().join(".codex")), "<codex-home>".into()),
            (show(&evidence.home()), "<home>".into()),
            (
                show(fake_program.parent().unwrap_or(fake_program)),
                "<app-server-install>".into(),
            ),
        ],
    };
    // The driver's part of the cell folder (where the workspace is) reads as the cell folder
    // itself: what the two runners were told stays comparable with pages recorded before the
    // split, and the harness's own evidence never reaches the app-server's messages.
    aliases.push((show(&evidence.driver()), "<cell>".into()));
    aliases.push((show(cell_root), "<cell>".into()));
    aliases.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    aliases
}

/// Where two normalised sequences first differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// 0-based position in the normalised sequences.
    pub index: usize,
    pub(crate) fake: Option<Value>,
    pub(crate) real: Option<Value>,
}

impl Divergence {
    pub(crate) fn describe(&self) -> String {
        let kind = |v: &Value| v["kind"].as_str().unwrap_or("?").to_string();
        match (&self.fake, &self.real) {
            (Some(fake), Some(real)) => {
                let found = field_diff::first(fake, real).unwrap_or(field_diff::FieldDifference {
                    path: String::new(),
                    left: Some(fake.clone()),
                    right: Some(real.clone()),
                });
                format!(
                    "message {} (fake {}, real {}) differs at `{}`: fake {} | real {}",
                    self.index,
                    kind(fake),
                    kind(real),
                    found.path,
                    found.show_left(),
                    found.show_right()
                )
            }
            (Some(fake), None) => format!(
                "message {}: the fake went on with {} where the real sequence ended",
                self.index,
                driver::rpc::excerpt(&fake.to_string(), 240)
            ),
            (None, Some(real)) => format!(
                "message {}: the real Codex went on with {} where the fake sequence ended",
                self.index,
                driver::rpc::excerpt(&real.to_string(), 240)
            ),
            (None, None) => format!("message {}: no difference", self.index),
        }
    }
}

pub(crate) fn first_divergence(fake: &[Value], real: &[Value]) -> Option<Divergence> {
    let longest = fake.len().max(real.len());
    (0..longest)
        .find(|&i| fake.get(i) != real.get(i))
        .map(|index| Divergence {
            index,
            fake: fake.get(index).cloned(),
            real: real.get(index).cloned(),
        })
}

#[cfg(test)]
mod launch_tests;
#[cfg(test)]
mod tests;

/// How one side of a pair ended.
#[derive(Debug, Clone)]
pub struct SideOutcome {
    pub cell: String,
    /// The verdict string, or `ignored: …` / `error: …`.
    pub verdict: String,
    pub graded: bool,
    pub sequence: Vec<Value>,
    pub wall: std::time::Duration,
    /// Real Codex only: how long the mock model API served (brackets the app-server's life).
    pub codex_span: Option<std::time::Duration>,
    /// Why the driver cut this side's sequence short itself (see [`cut`]), if it did.
    pub(crate) cut: Option<String>,
    /// The driver ended on its own, never stopped at the harness's bound ([`cut::ended_on_its_own`]):
    /// where it closed the app-server's stdin is then its own timing.
    pub(crate) ended_on_its_own: bool,
    /// Item type → the shapes of the app-server's item ids in the transcript.
    pub(crate) id_shapes: wire::IdShapes,
    /// What the driver sent to the app-server, normalised ([`sent`]).
    pub(crate) sent: Vec<Value>,
    /// What the app-server answered to it, every launch, normalised ([`answers`]).
    pub(crate) answers: Vec<Value>,
}

impl SideOutcome {
    /// Harness time: the cell's wall time outside the app-server's span.
    pub fn harness_time(&self) -> Option<std::time::Duration> {
        self.codex_span.map(|span| self.wall.saturating_sub(span))
    }
}

/// The comparison of one pair.
#[derive(Debug, Clone)]
pub struct PairOutcome {
    pub pair: String,
    pub scenario: String,
    pub fake: SideOutcome,
    pub real: SideOutcome,
    pub divergence: Option<Divergence>,
    /// Where one sequence ended because its driver cut it short (see [`cut`]): compared up
    /// to there only.
    pub truncated: Option<Truncation>,
    /// Item types whose id shapes differ (fake → real).
    pub id_changes: Vec<String>,
    /// Where what the driver sent differs between the sides ([`sent`]).
    pub sent_difference: Option<String>,
    /// The first answer of the app-server that differs between the sides ([`answers`]); only
    /// where the fake plays the real Codex's release.
    pub(crate) answer_difference: Option<String>,
}

/// A sequence the driver cut short: the messages before `index` matched, the other side's
/// messages from `index` on were not compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Truncation {
    pub index: usize,
    /// `fake` or `real`: the side whose sequence ended.
    pub side: &'static str,
    pub(crate) reason: String,
    /// The other side's sequence length.
    pub other_len: usize,
}

impl Truncation {
    pub fn describe(&self) -> String {
        format!(
            "compared up to message {} of {}: the {} run ended there because {}",
            self.index, self.other_len, self.side, self.reason
        )
    }
}

/// Compare two graded sequences: the first divergence, unless the only difference is where a
/// driver that ended on its own closed the app-server's stdin ([`cut`]): first strictly (a
/// side its driver cut short up to its cut), then, where that differs, up to the earlier of the
/// two closings ([`cut::up_to_the_earlier_close`]).
pub(crate) fn compare(
    fake: &SideOutcome,
    real: &SideOutcome,
) -> (Option<Divergence>, Option<Truncation>) {
    let (fake_all, real_all) = (
        without_requests(&fake.sequence),
        without_requests(&real.sequence),
    );
    let (fake_seq, real_seq) = (
        cut::up_to_the_cut(fake_all.clone(), fake),
        cut::up_to_the_cut(real_all.clone(), real),
    );
    let Some(divergence) = first_divergence(&fake_seq, &real_seq) else {
        return (None, None);
    };
    let ended = match (&divergence.fake, &divergence.real) {
        (Some(_), None) => Some(("real", real, &fake_all)),
        (None, Some(_)) => Some(("fake", fake, &real_all)),
        _ => None,
    };
    match ended {
        Some((side, short, long)) if short.cut.is_some() => (
            None,
            Some(Truncation {
                index: divergence.index,
                side,
                reason: short.cut.clone().unwrap_or_default(),
                other_len: long.len(),
            }),
        ),
        _ => cut::up_to_the_earlier_close(fake, &fake_all, real, &real_all)
            .unwrap_or((Some(divergence), None)),
    }
}

/// The sequence as compared: without the driver's client requests and their answers, whose
/// places among the app-server's notifications are the driver's timing when it sends without
/// waiting (codex-acp pipelines its requests and its turn), not behaviour; what the driver sent
/// is compared line by line ([`sent`]). And without whether the app-server's exit came after
/// the driver closed its stdin: a driver that closes stdin and signals the app-server at once
/// (the Python SDK) races the two, on either side; for the same reason, where the driver's
/// stdin closing and the app-server's exit are recorded next to each other, their order is not
/// compared.
fn without_requests(sequence: &[Value]) -> Vec<Value> {
    let mut compared: Vec<Value> = sequence
        .iter()
        .filter(|event| {
            event["kind"] != "protocol.client-request"
                && event["kind"] != "protocol.client-request-answered"
        })
        .cloned()
        .map(|mut event| {
            if event["kind"] == "protocol.app-server-exited" {
                if let Some(payload) = event["payload"].as_object_mut() {
                    payload.remove("after_stdin_closed");
                }
            }
            event
        })
        .collect();
    let is_end = |event: &Value| {
        event["kind"] == "protocol.stdin-closed" || event["kind"] == "protocol.app-server-exited"
    };
    for index in 1..compared.len() {
        if is_end(&compared[index - 1])
            && is_end(&compared[index])
            && compared[index - 1]["kind"] == "protocol.app-server-exited"
        {
            compared.swap(index - 1, index);
        }
    }
    compared
}

impl PairOutcome {
    /// Ok when both sides were graded and agree; else why not, naming the pair: a side that
    /// was not graded, or the first difference.
    pub fn agreement(&self) -> Result<(), String> {
        if !self.compared() {
            return Err(format!(
                "{}: not compared: fake {} / real {}",
                self.pair, self.fake.verdict, self.real.verdict
            ));
        }
        match self.failure() {
            Some(failure) => Err(format!("{}: {failure}", self.pair)),
            None => Ok(()),
        }
    }

    /// Both sides graded.
    pub fn compared(&self) -> bool {
        self.fake.graded && self.real.graded
    }

    /// A fidelity failure: both ran and the verdicts or the sequences differ.
    pub fn failure(&self) -> Option<String> {
        if !self.compared() {
            return None;
        }
        // What the app-server said, first: a driver that ends otherwise on one side (its exit
        // code, its events) does so because of an answer, which is what to name; the verdicts
        // are named too when they differ.
        let Some(answer) = &self.answer_difference else {
            return self.consequence();
        };
        Some(match self.verdicts_differ() {
            Some(verdicts) => format!("{answer}; {verdicts}"),
            None => answer.clone(),
        })
    }

    fn verdicts_differ(&self) -> Option<String> {
        (self.fake.verdict != self.real.verdict).then(|| {
            format!(
                "verdicts differ: fake {} vs real {}",
                self.fake.verdict, self.real.verdict
            )
        })
    }

    /// How the sides differ beyond the app-server's answers: the verdicts, the driver's
    /// sequence, what it sent, how ids are made (the first of these).
    fn consequence(&self) -> Option<String> {
        if let Some(verdicts) = self.verdicts_differ() {
            return Some(verdicts);
        }
        if let Some(divergence) = &self.divergence {
            return Some(divergence.describe());
        }
        if let Some(sent) = &self.sent_difference {
            return Some(sent.clone());
        }
        (!self.id_changes.is_empty()).then(|| {
            format!(
                "ids are made differently (fake → real): {}",
                self.id_changes.join("; ")
            )
        })
    }
}

/// Run both cells of `pair` (fake first) and compare them.
pub async fn run_pair(pair: &Pair, ctx: &matrix::context::CellContext) -> PairOutcome {
    let fake = matrix::cell::run_cell(ctx, &pair.fake).await;
    let real = matrix::cell::run_cell(ctx, &pair.real).await;
    compare_results(pair, &fake, &real, ctx)
}

/// Compare the two cells of `pair` from their results and the evidence they left. The cells
/// may have run for another reason first (the suites' `cells` test binary runs each cell once
/// and compares its pairs from that run), as long as nothing has overwritten their evidence.
pub fn compare_results(
    pair: &Pair,
    fake: &CellResult,
    real: &CellResult,
    ctx: &matrix::context::CellContext,
) -> PairOutcome {
    let mut fake = side_outcome(&pair.fake, fake, ctx);
    let mut real = side_outcome(&pair.real, real, ctx);
    let same_release = pair.real.runner.codex_version.as_deref() == Some(plays(&pair.fake.runner));
    if !same_release {
        normalise::mask_release(&mut fake.sequence);
        normalise::mask_release(&mut real.sequence);
    }
    let (divergence, truncated) = if fake.graded && real.graded {
        compare(&fake, &real)
    } else {
        (None, None)
    };
    let (id_changes, sent_difference, answer_difference) = if fake.graded && real.graded {
        (
            wire::id_shape_changes(&fake.id_shapes, &real.id_shapes),
            sent_difference(&fake, &real, truncated.as_ref()),
            // Held to the release the fake plays only ([`answers::difference`]).
            same_release
                .then(|| answers::difference(&fake.answers, &real.answers))
                .flatten(),
        )
    } else {
        (Vec::new(), None, None)
    };
    PairOutcome {
        pair: pair.name(),
        scenario: pair.scenario().to_string(),
        fake,
        real,
        divergence,
        truncated,
        id_changes,
        sent_difference,
        answer_difference,
    }
}

/// Where what the driver sent differs ([`sent`]). It may end early on a side its driver cut
/// short, and on the side whose messages were compared only up to where it ended first
/// (`truncated`): the driver stopped sending there for the same reason.
pub(crate) fn sent_difference(
    fake: &SideOutcome,
    real: &SideOutcome,
    truncated: Option<&Truncation>,
) -> Option<String> {
    let ended_first = |side: &str| truncated.is_some_and(|t| t.side == side);
    sent::difference(
        &fake.sent,
        &real.sent,
        fake.cut.is_some() || ended_first("fake"),
        real.cut.is_some() || ended_first("real"),
    )
}
