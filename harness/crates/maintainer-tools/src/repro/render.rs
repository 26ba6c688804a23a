//! The printed report of `harness repro`.

use super::{AppServer, Report, Run, CASE, SUITE};
use graders::events::PolicyGeneration;
use report::layout::CellEvidence;
use report::outcome::CellOutcome;
use std::fmt::Write;
use std::path::Path;

pub(crate) fn generation_label(policy: PolicyGeneration) -> &'static str {
    match policy {
        PolicyGeneration::Legacy => "legacy planning profile",
        PolicyGeneration::Current => "fixed planning profile",
    }
}

/// `'text'` for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let failure = report.failure;
    let _ = writeln!(
        out,
        "== harness repro {}: environment `{}` ==",
        failure.name(),
        failure.environment()
    );
    let _ = writeln!(out, "app-server: {}", report.app_server.describe());
    if let AppServer::Fake { why } = &report.app_server {
        let _ = writeln!(out, "  (the pinned Codex is not installed: {why})");
    }
    let _ = writeln!(
        out,
        "runs: {SUITE}/{CASE}, a planning run in an external sandbox (network {}), reference driver, graded by the real grader",
        if report.network_disabled { "disabled" } else { "enabled" }
    );
    for (index, run) in report.runs.iter().enumerate() {
        render_run(&mut out, index + 1, run);
    }
    let _ = writeln!(out, "\nWhy:\n{}", wrap(&failure.explanation(), 96));
    render_rerun(&mut out, report);
    out
}

fn render_run(out: &mut String, number: usize, run: &Run) {
    let evidence = run.evidence.as_ref();
    let profile = evidence
        .and_then(|e| e.launch.as_ref())
        .and_then(|launch| launch.thread_permissions.as_deref())
        .unwrap_or("?");
    let _ = writeln!(
        out,
        "\n-- {number}. {}: `{profile}` --\ncell: {}",
        generation_label(run.policy),
        run.cell
    );
    if let Some(arg) = evidence.and_then(|e| e.profile_override()) {
        let _ = writeln!(out, "profile: -c {}", shell_quote(arg));
    }
    if let Some((seq, which)) = evidence.and_then(|e| e.bubblewrap.as_ref()) {
        let _ = writeln!(out, "bubblewrap: {which} (seq {seq})");
    }
    match (
        evidence.and_then(|e| e.thread_start_error.as_ref()),
        evidence.and_then(|e| e.thread_started.as_ref()),
    ) {
        (_, Some((seq, started))) => {
            let _ = writeln!(
                out,
                "thread/start: OK (seq {seq}: thread {}, active profile {})",
                started.thread_id,
                started.sandbox.active_profile.as_deref().unwrap_or("?")
            );
        }
        (Some((seq, rejected)), None) => {
            let _ = writeln!(
                out,
                "thread/start: ERROR {} (seq {seq}):\n  {}",
                rejected.code, rejected.message
            );
        }
        (None, None) => {
            let _ = writeln!(out, "thread/start: no answer recorded");
        }
    }
    match &run.result.outcome {
        CellOutcome::Graded { verdict, .. } => {
            let _ = writeln!(out, "key evidence:");
            for line in &verdict.evidence {
                let seq = line.seq.map_or("-".into(), |seq| seq.to_string());
                let _ = writeln!(out, "  seq {seq}: {}", line.excerpt);
            }
            let _ = writeln!(out, "verdict: {} — {}", verdict.verdict, verdict.reason);
        }
        CellOutcome::Ignored { reason } => {
            let _ = writeln!(out, "verdict: none (cannot run here: {reason})");
        }
        CellOutcome::NotApplicable { reason } => {
            let _ = writeln!(out, "verdict: none (not applicable: {reason})");
        }
        CellOutcome::Error { message } => {
            let _ = writeln!(out, "verdict: none (harness error: {message})");
        }
    }
    let _ = writeln!(
        out,
        "evidence: {} (events.jsonl, transcript.jsonl, stderr.log, verdict.json; {:.1} s)",
        run.result.evidence_dir.display(),
        run.result.duration.as_secs_f64()
    );
}

fn render_rerun(out: &mut String, report: &Report) {
    let failure = report.failure;
    let _ = writeln!(out, "\nRerun by hand:");
    let _ = writeln!(
        out,
        "  harness env probe {}   # the canary bubblewrap inside the environment",
        failure.environment()
    );
    if !report.network_disabled {
        let cells: Vec<&str> = report.runs.iter().map(|run| run.cell.as_str()).collect();
        let _ = writeln!(
            out,
            "  harness run {}   # the same cells in the matrix",
            cells.join(" ")
        );
    }
    for run in &report.runs {
        let _ = writeln!(
            out,
            "  harness grade --suite {SUITE} --case {CASE} {}",
            CellEvidence::new(&run.result.evidence_dir)
                .events()
                .display()
        );
    }
    if !report.kept {
        let _ = writeln!(
            out,
            "  harness repro {} --keep   # keep the runc bundles and print `runc run --bundle …` for each launch",
            failure.name()
        );
        return;
    }
    for run in &report.runs {
        let _ = writeln!(
            out,
            "  # {} (as root; each is one app-server launch):",
            generation_label(run.policy)
        );
        for (id, bundle) in &run.bundles {
            let _ = writeln!(out, "  {}", sandbox::runc::rerun_command(id, bundle));
        }
        let lines =
            sent_until_thread_start(&CellEvidence::new(&run.result.evidence_dir).transcript());
        if !lines.is_empty() {
            let _ = writeln!(
                out,
                "  #   then paste the driver's first lines (from transcript.jsonl):"
            );
            for line in lines {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    let bundles: Vec<String> = report
        .runs
        .iter()
        .flat_map(|run| run.bundles.iter().map(|(_, b)| b.display().to_string()))
        .collect();
    if !bundles.is_empty() {
        let _ = writeln!(
            out,
            "  (remove the bundles afterwards: rm -rf {})",
            bundles.join(" ")
        );
    }
}

/// The JSON-RPC messages the driver sent, up to and including `thread/start` (a transcript line
/// is `{"direction":"in","message":…}`, "in" being towards the app-server).
fn sent_until_thread_start(transcript: &Path) -> Vec<String> {
    let Ok(Some(bytes)) =
        graders::evidence_file::read(transcript, graders::evidence_file::MAX_STREAMED_BYTES)
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = Vec::new();
    for line in text.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if entry["direction"] != "in" {
            continue;
        }
        let message = &entry["message"];
        lines.push(message.to_string());
        if message["method"] == "thread/start" {
            break;
        }
    }
    lines
}

fn wrap(text: &str, width: usize) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
        .into_iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
