//! One side of a pair as compared: its verdict, the driver's normalised sequence, what the
//! driver sent and what the app-server answered, read from the cell's result and evidence.

use super::{answers, cut, normalise, normalise_with, sent, side_aliases, wire, SideOutcome};
use graders::events::Event;
use report::layout::CellEvidence;
use report::outcome::CellResult;
use suites::spec::AppServerKind;
use suites::Cell;

/// One side of a pair, from its cell's result and evidence; a real-Codex cell's install folder
/// is aliased away like the cell's own folders (so two Codex versions compare too, as `harness
/// drift` does).
pub(super) fn side_outcome(
    cell: &Cell,
    result: &CellResult,
    ctx: &matrix::context::CellContext,
) -> SideOutcome {
    use report::outcome::CellOutcome;
    let real = cell.runner.app_server == AppServerKind::Codex;
    let evidence = CellEvidence::new(&result.evidence_dir);
    let install = if real {
        cell.runner
            .codex_version
            .as_deref()
            .and_then(|v| codex::provision::resolve(v).ok())
            .map(|install| install.package_dir)
    } else {
        None
    };
    let aliases = side_aliases(
        &result.evidence_dir,
        install.as_deref(),
        &ctx.harness_binary,
    );
    let (verdict, graded) = match &result.outcome {
        CellOutcome::Graded { verdict, .. } => (verdict.verdict.to_string(), true),
        CellOutcome::Ignored { reason } => (format!("ignored: {reason}"), false),
        CellOutcome::NotApplicable { reason } => (format!("not applicable: {reason}"), false),
        CellOutcome::Error { message } => (format!("error: {message}"), false),
    };
    let (sequence, cut, ended_on_its_own, sent, answers, racing) = if graded {
        match read_events(&evidence.events()) {
            Ok(events) => {
                let transcript = cut::read_transcript(&evidence.transcript());
                (
                    normalise_with(&events, &aliases),
                    cut::driver_cut(&transcript, &events),
                    cut::ended_on_its_own(&events),
                    sent::driver_sent(&transcript, &aliases),
                    answers::app_server_answers(&transcript, &aliases),
                    normalise::racing_denied_commands(&events),
                )
            }
            Err(e) => {
                return SideOutcome {
                    cell: cell.name(),
                    verdict: format!("error: {e:#}"),
                    graded: false,
                    sequence: Vec::new(),
                    wall: result.duration,
                    codex_span: None,
                    cut: None,
                    ended_on_its_own: false,
                    id_shapes: Default::default(),
                    sent: Vec::new(),
                    answers: Vec::new(),
                }
            }
        }
    } else {
        (Vec::new(), None, false, Vec::new(), Vec::new(), Vec::new())
    };
    let codex_span = real
        .then(|| read_codex_span(&result.evidence_dir))
        .flatten();
    let id_shapes = wire::app_server_id_shapes(&evidence.transcript(), &racing);
    SideOutcome {
        cell: cell.name(),
        verdict,
        graded,
        sequence,
        wall: result.duration,
        codex_span,
        cut,
        ended_on_its_own,
        id_shapes,
        sent,
        answers,
    }
}

/// The largest `model-api-timing.json` read (it holds a few numbers).
const MAX_TIMING_BYTES: u64 = 1 << 20;

fn read_codex_span(evidence_dir: &std::path::Path) -> Option<std::time::Duration> {
    let path = CellEvidence::new(evidence_dir).model_api_timing();
    let bytes = graders::evidence_file::read(&path, MAX_TIMING_BYTES).ok()??;
    let timing: codex::mock_api::MockTiming = serde_json::from_slice(&bytes).ok()?;
    Some(std::time::Duration::from_millis(
        u64::try_from(timing.served_ms).unwrap_or(u64::MAX),
    ))
}

/// A cell's events (the stream the cell was graded on).
pub(crate) fn read_events(path: &std::path::Path) -> anyhow::Result<Vec<Event>> {
    use anyhow::Context;
    let bytes = graders::evidence_file::read(path, graders::evidence_file::MAX_STREAMED_BYTES)?
        .with_context(|| format!("reading {}: there is none", path.display()))?;
    let text = std::str::from_utf8(&bytes)
        .with_context(|| format!("reading {}: not UTF-8", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{} line {}", path.display(), index + 1))
        })
        .collect()
}
