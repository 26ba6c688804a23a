//! The mutation section of report.html (`harness mutate`, docs/mutate.md): per driver, per
//! operator, killed (by which cells) / survived / unsteady / not applicable, and the score. The harness
//! judges the mutants; this module only shows what it was given.

use super::escape;
use std::fmt::Write;

/// What `harness mutate` found, as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationSection {
    /// Every driver's operators together.
    pub score: Option<f64>,
    pub drivers: Vec<MutationDriver>,
    /// `--fidelity`: the drivers compared between the fake and the real Codex, and where they
    /// disagreed.
    pub fidelity: Option<MutationFidelity>,
}

/// The fake and the real Codex, per operator (`harness mutate --fidelity`).
#[derive(Debug, Clone, PartialEq)]
pub struct MutationFidelity {
    /// Each `[fake runner, real-Codex runner]` compared.
    pub pairs: Vec<[String; 2]>,
    /// Each disagreement, in words: a finding about the fake.
    pub findings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MutationDriver {
    pub driver: String,
    pub score: Option<f64>,
    pub operators: Vec<MutationRow>,
}

/// One operator against one driver.
#[derive(Debug, Clone, PartialEq)]
pub struct MutationRow {
    pub operator: String,
    /// The driver bug it plays, in words.
    pub bug: String,
    /// `killed`, `survived`, `unsteady` or `not applicable`.
    pub status: String,
    /// Each killing cell, with its outcome unmutated → mutated (and its second run's).
    pub killed_by: Vec<(String, String)>,
    /// Each cell whose kill a second run did not reproduce, with both outcomes.
    pub unconfirmed: Vec<(String, String)>,
    /// Cells where it rewrote something.
    pub applied_in: usize,
    /// Cells not run: their reference held nothing it rewrites.
    pub predicted_untouched: usize,
    /// Cells not run because one had killed it already (its first kill).
    pub not_run_after_kill: usize,
}

fn percent(score: Option<f64>) -> String {
    score.map_or_else(|| "n/a".into(), |s| format!("{:.0}%", s * 100.0))
}

/// The section's HTML.
pub(super) fn section(mutation: &MutationSection) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<section class=\"mutation\" id=\"mutation\"><h2>Mutation score {}</h2><p class=\"hint\">Each operator rewrites what the driver sends as a driver with that bug would (docs/mutate.md); killed: some cell noticed.</p>",
        percent(mutation.score)
    );
    if let Some(fidelity) = &mutation.fidelity {
        fidelity_part(&mut out, fidelity);
    }
    for driver in &mutation.drivers {
        let _ = write!(
            out,
            "<h3>{} — {}</h3><table class=\"mutation\"><thead><tr><th>operator</th><th>status</th><th>detail</th></tr></thead><tbody>",
            escape(&driver.driver),
            percent(driver.score)
        );
        for row in &driver.operators {
            let detail = match row.status.as_str() {
                "killed" => {
                    let first = if row.not_run_after_kill > 0 {
                        format!(
                            "<p class=\"hint\">first kill; {} cells not run</p>",
                            row.not_run_after_kill
                        )
                    } else {
                        String::new()
                    };
                    let mut detail = format!("by{}{first}", cells(&row.killed_by));
                    if !row.unconfirmed.is_empty() {
                        let _ = write!(
                            detail,
                            "not reproduced by a second run{}",
                            cells(&row.unconfirmed)
                        );
                    }
                    detail
                }
                "unsteady" => format!(
                    "killed once, not again in a second run (not in the score){}",
                    cells(&row.unconfirmed)
                ),
                "survived" => format!(
                    "applied in {} cells, no outcome changed: {}",
                    row.applied_in,
                    escape(&row.bug)
                ),
                _ => format!(
                    "applied in no cell ({} predicted from the reference, not run)",
                    row.predicted_untouched
                ),
            };
            let class = row.status.replace(' ', "-");
            let _ = write!(
                out,
                "<tr class=\"m-{class}\"><td title=\"{bug}\">{op}</td><td>{status}</td><td>{detail}</td></tr>",
                bug = escape(&row.bug),
                op = escape(&row.operator),
                status = escape(&row.status),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    out
}

/// Cells with their outcomes, as a list.
fn cells(cells: &[(String, String)]) -> String {
    let items: Vec<String> = cells
        .iter()
        .map(|(cell, change)| {
            format!(
                "<li>{} <span class=\"hint\">{}</span></li>",
                escape(cell),
                escape(change)
            )
        })
        .collect();
    format!("<ul>{}</ul>", items.join(""))
}

fn fidelity_part(out: &mut String, fidelity: &MutationFidelity) {
    let pairs: Vec<String> = fidelity
        .pairs
        .iter()
        .map(|[fake, real]| format!("{} ~ {}", escape(fake), escape(real)))
        .collect();
    let _ = write!(
        out,
        "<h3>The fake and the real Codex, per operator</h3><p class=\"hint\">Compared: {}.</p>",
        pairs.join(", ")
    );
    if fidelity.findings.is_empty() {
        out.push_str("<p>Every operator has the same status against both app-servers.</p>");
        return;
    }
    out.push_str("<ul class=\"findings\">");
    for finding in &fidelity.findings {
        let _ = write!(out, "<li class=\"m-survived\">{}</li>", escape(finding));
    }
    out.push_str("</ul>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_each_operator_its_status_and_the_score() {
        let row = |operator: &str, status: &str, killed_by: Vec<(String, String)>| MutationRow {
            operator: operator.into(),
            bug: format!("the driver <{operator}>"),
            status: status.into(),
            killed_by,
            unconfirmed: Vec::new(),
            applied_in: 2,
            predicted_untouched: 3,
            not_run_after_kill: if status == "killed" { 4 } else { 0 },
        };
        let mutation = MutationSection {
            score: Some(0.5),
            drivers: vec![MutationDriver {
                driver: "mini-fake".into(),
                score: Some(0.5),
                operators: vec![
                    row(
                        "drop-initialized",
                        "killed",
                        vec![(
                            "protocol-handshake.mini-fake.local.handshake".into(),
                            "pass → fail: initialized-sent".into(),
                        )],
                    ),
                    row("approval-never", "survived", Vec::new()),
                    row("exit-zero", "not applicable", Vec::new()),
                ],
            }],
            fidelity: None,
        };
        insta::assert_snapshot!("mutation_section", section(&mutation));
    }

    #[test]
    fn a_disagreement_between_the_app_servers_is_shown_as_a_finding_about_the_fake() {
        let mut mutation = MutationSection {
            score: Some(1.0),
            drivers: Vec::new(),
            fidelity: Some(MutationFidelity {
                pairs: vec![["mini-fake".into(), "mini-codex".into()]],
                findings: Vec::new(),
            }),
        };
        let agreed = section(&mutation);
        assert!(agreed.contains("mini-fake ~ mini-codex"), "{agreed}");
        assert!(
            agreed.contains("Every operator has the same status"),
            "{agreed}"
        );
        mutation.fidelity.as_mut().unwrap().findings =
            vec!["fidelity finding about the fake: `duplicate-requests` <survives>".into()];
        let found = section(&mutation);
        assert!(
            !found.contains("Every operator has the same status"),
            "{found}"
        );
        assert!(
            found
                .contains("fidelity finding about the fake: `duplicate-requests` &lt;survives&gt;"),
            "{found}"
        );
    }

    #[test]
    fn an_unsteady_operator_names_its_cells_and_both_outcomes() {
        let row = MutationRow {
            operator: "close-after-turn-start".into(),
            bug: "the driver closes".into(),
            status: "unsteady".into(),
            killed_by: Vec::new(),
            unconfirmed: vec![(
                "protocol-turn-outcomes.mini-fake.local.interrupted-turn".into(),
                "pass → incomplete, then pass".into(),
            )],
            applied_in: 1,
            predicted_untouched: 0,
            not_run_after_kill: 0,
        };
        let mutation = MutationSection {
            score: None,
            drivers: vec![MutationDriver {
                driver: "mini-fake".into(),
                score: None,
                operators: vec![row],
            }],
            fidelity: None,
        };
        let html = section(&mutation);
        assert!(
            html.contains("<tr class=\"m-unsteady\">")
                && html.contains("not again in a second run (not in the score)")
                && html.contains(
                    "interrupted-turn <span class=\"hint\">pass → incomplete, then pass</span>"
                ),
            "{html}"
        );
    }
}
