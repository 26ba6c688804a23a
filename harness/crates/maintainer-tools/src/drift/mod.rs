//! `harness drift VERSION`: what changes for drivers if a published Codex replaces the pin. Four
//! comparisons, every difference named: the protocol schema (methods, notifications, server
//! requests; fields added, removed or changed), the unknown-method list, the answers a driver
//! reads around its threads (`model/list`, `config/read`, …), and the matrix played on VERSION
//! next to the pin (every real-Codex cell of the pin, run again on VERSION: verdict and
//! driver-visible message sequence). It also records the fake's persona of VERSION.

pub(crate) mod ask;
pub(crate) mod experimental;
pub(crate) mod features;
pub mod persona;
pub mod schema;
pub mod unknown;

use crate::fidelity::{self, wire, Pair, PairOutcome};
use anyhow::{Context, Result};
use codex::provision;
use report::layout::CellEvidence;
use std::fmt::Write;
use suites::spec::AppServerKind;
use suites::{Cell, Matrix};

/// The runner name of `runner` played on `version` (`runner-codex` → `runner-codex@0-171-0`
/// spelled with dashes, as cell names split on dots).
pub(crate) fn runner_on(runner: &str, version: &str) -> String {
    format!("{runner}-on-{}", version.replace('.', "-"))
}

/// Every real-Codex cell of the pin matching `filters`, each with its twin on `version`.
pub fn matrix_pairs(matrix: &Matrix, version: &str, filters: &[String]) -> Vec<Pair> {
    matrix
        .cells
        .iter()
        .filter(|cell| {
            cell.runner.app_server == AppServerKind::Codex
                && cell.runner.codex_version.as_deref() == Some(provision::PINNED)
        })
        .map(|pinned| {
            let mut twin: Cell = pinned.clone();
            twin.id.runner = runner_on(&pinned.id.runner, version);
            twin.runner.codex_version = Some(version.to_string());
            // The twin's expectation is the pin's verdict: a different verdict is drift.
            Pair {
                fake: pinned.clone(),
                real: twin,
            }
        })
        .filter(|pair| {
            let name = pair.name();
            filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
        })
        .collect()
}

/// The schema and unknown-method comparison of `version` against the pin.
pub struct ProtocolDrift {
    pub(crate) version: String,
    pub schema: Vec<schema::Change>,
    pub unknown_added: Vec<String>,
    pub unknown_removed: Vec<String>,
    /// How the answers of `persona::settings_answers` differ.
    pub(crate) settings_changes: Vec<String>,
    /// Where the recorded persona of `version` was written.
    pub(crate) persona_dir: std::path::PathBuf,
    /// How the fake's own persona of `version` differs from the recording (`None`: it has none).
    pub(crate) persona_differences: Option<Vec<String>>,
}

/// Provision both versions, generate both schemas into `scratch`, and compare.
pub fn protocol_drift(version: &str, scratch: &std::path::Path) -> Result<ProtocolDrift> {
    let pinned = provision::ensure(provision::PINNED)
        .with_context(|| format!("the pinned Codex {}", provision::PINNED))?;
    let other = provision::ensure(version).with_context(|| format!("Codex {version}"))?;
    let mut protocols = Vec::new();
    let mut listed = Vec::new();
    let mut answers = Vec::new();
    for install in [&pinned, &other] {
        let dir = scratch.join(format!("schema-{}", install.version));
        schema::generate(&install.binary, &dir)?;
        protocols.push(schema::load(&dir)?);
        let home = scratch.join(format!("home-{}", install.version));
        std::fs::create_dir_all(&home)?;
        let message = unknown::unknown_method_error(&install.binary, &["app-server"], &home)?;
        listed.push(unknown::listed_methods(&message)?);
        let settings = scratch.join(format!("settings-{}", install.version));
        answers.push(persona::settings_answers(
            &install.binary,
            &["app-server"],
            &settings,
        )?);
    }
    let persona_dir = scratch.join(format!("fake-persona-{version}"));
    let thread_answers = persona::thread_answers(
        &other.binary,
        &["app-server"],
        &scratch.join(format!("threads-{version}")),
    )?;
    let experimental_notifications = persona::experimental_notifications(
        &other.binary,
        &scratch.join(format!("experimental-{version}")),
    )?;
    let feature_aliases =
        features::feature_aliases(&other.binary, &scratch.join(format!("features-{version}")))?;
    let experimental_gate =
        experimental::record(&other.binary, &scratch.join(format!("gate-{version}")))?;
    let recording = persona::record(
        listed[1].clone(),
        protocols[1].notifications.clone(),
        &answers[1],
        persona::Recorded {
            thread_answers,
            experimental_notifications,
            feature_aliases,
            experimental_gate,
        },
    )?;
    recording.write(&persona_dir)?;
    let persona_differences = fake_app_server::persona::find(version)
        .ok()
        .map(|fake| persona::differences(fake, &recording));
    let (old, new) = (&listed[0], &listed[1]);
    Ok(ProtocolDrift {
        version: version.to_string(),
        schema: schema::diff(&protocols[0], &protocols[1]),
        unknown_added: new.iter().filter(|m| !old.contains(m)).cloned().collect(),
        unknown_removed: old.iter().filter(|m| !new.contains(m)).cloned().collect(),
        settings_changes: persona::answer_changes(&answers[0], &answers[1]),
        persona_dir,
        persona_differences,
    })
}

/// One matrix pair's outcome, with the id shapes the driver events cannot show.
pub struct MatrixDrift {
    pub(crate) outcome: PairOutcome,
    pub(crate) id_changes: Vec<String>,
}

/// The report, as Markdown.
pub fn render(drift: &ProtocolDrift, matrix: &[MatrixDrift]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Drift: Codex {} against the pin {}\n",
        drift.version,
        provision::PINNED
    );
    render_schema(&mut out, drift);
    render_answers(&mut out, drift);
    render_persona(&mut out, drift);
    render_matrix(&mut out, drift, matrix);
    out
}

/// The schema's changes, counted by kind and then listed.
fn render_schema(out: &mut String, drift: &ProtocolDrift) {
    let count = |kind: &str, sign: &str| {
        drift
            .schema
            .iter()
            .filter(|c| {
                let shown = c.to_string();
                shown.starts_with(sign) && shown.contains(kind)
            })
            .count()
    };
    let _ = writeln!(out, "### Protocol schema\n");
    for kind in ["client method", "notification", "server request", "type"] {
        let _ = writeln!(
            out,
            "- {kind}s: {} added, {} removed",
            count(&format!("{kind} `"), "+"),
            count(&format!("{kind} `"), "-")
        );
    }
    let _ = writeln!(out);
    for change in &drift.schema {
        let _ = writeln!(out, "- {change}");
    }
}

/// The unknown-method list's changes and the changed answers a driver reads around its threads.
fn render_answers(out: &mut String, drift: &ProtocolDrift) {
    let _ = writeln!(out, "\n### Unknown-method list\n");
    if drift.unknown_added.is_empty() && drift.unknown_removed.is_empty() {
        let _ = writeln!(out, "- the same methods");
    }
    for method in &drift.unknown_added {
        let _ = writeln!(out, "- + `{method}`");
    }
    for method in &drift.unknown_removed {
        let _ = writeln!(out, "- - `{method}`");
    }
    let _ = writeln!(out, "\n### What a driver reads around its threads\n");
    if drift.settings_changes.is_empty() {
        let _ = writeln!(out, "- the same answers");
    }
    for change in &drift.settings_changes {
        let _ = writeln!(out, "- {change}");
    }
}

/// Whether the fake plays the release, and how its persona differs from the recording.
fn render_persona(out: &mut String, drift: &ProtocolDrift) {
    let _ = writeln!(out, "\n### The fake's persona of {}\n", drift.version);
    let folder = drift.persona_dir.display();
    match &drift.persona_differences {
        None => {
            let _ = writeln!(
                out,
                "- the fake has none; recorded in `{folder}`: copy it to `fake-app-server/personas/{}/` and add its row to `fake_app_server::persona`",
                drift.version
            );
        }
        Some(differences) if differences.is_empty() => {
            let _ = writeln!(
                out,
                "- the fake plays it; its data match this recording (`{folder}`)"
            );
        }
        Some(differences) => {
            for difference in differences {
                let _ = writeln!(
                    out,
                    "- the fake's persona differs: {difference} (recorded in `{folder}`)"
                );
            }
        }
    }
}

/// The matrix pairs, pin next to the release, as a table (none: no section).
fn render_matrix(out: &mut String, drift: &ProtocolDrift, matrix: &[MatrixDrift]) {
    if !matrix.is_empty() {
        let _ = writeln!(
            out,
            "\n### The matrix on {} next to the pin\n",
            drift.version
        );
        let _ = writeln!(
            out,
            "| cell | pin | {} | sequence | item ids |",
            drift.version
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for MatrixDrift {
            outcome,
            id_changes,
        } in matrix
        {
            let sequence = match (&outcome.divergence, outcome.compared()) {
                (Some(divergence), _) => divergence.describe(),
                (None, true) => match &outcome.truncated {
                    Some(truncated) => truncated.describe(),
                    None => format!("same ({} messages)", outcome.real.sequence.len()),
                },
                (None, false) => "not compared".to_string(),
            };
            let ids = if id_changes.is_empty() {
                "same".to_string()
            } else {
                id_changes.join("; ")
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                outcome.real.cell,
                outcome.fake.verdict,
                outcome.real.verdict,
                sequence.replace('|', "\\|").replace('\n', " "),
                ids.replace('|', "\\|")
            );
        }
    }
}

/// Run the matrix pairs (pin first, then `version`), bounded by the cells' own timeouts.
pub async fn run_matrix(pairs: &[Pair], ctx: &matrix::context::CellContext) -> Vec<MatrixDrift> {
    let mut outcomes = Vec::new();
    for pair in pairs {
        tracing::info!(target: "notice", "running {}", pair.name());
        let outcome = fidelity::run_pair(pair, ctx).await;
        let transcript = |cell: &Cell| {
            wire::item_id_shapes(
                &CellEvidence::of(&ctx.out_root, &cell.name()).transcript(),
                &[],
            )
        };
        let id_changes = wire::id_shape_changes(&transcript(&pair.fake), &transcript(&pair.real));
        outcomes.push(MatrixDrift {
            outcome,
            id_changes,
        });
    }
    outcomes
}
