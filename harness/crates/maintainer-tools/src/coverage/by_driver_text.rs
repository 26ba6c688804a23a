//! `harness coverage --drivers` as text: the terminal's table and the Markdown section (the CI
//! job summary) of [`Exercised`].

use super::by_driver::{Exercised, MethodRow, Run};
use super::FakeAnswer;
use std::fmt::Write;

/// The columns of one kind of table: its title and what its counts are.
struct Columns {
    title: &'static str,
    counts: &'static [&'static str],
    profile: &'static str,
    /// Whether the table says how the fake answers (client requests).
    fake: bool,
}

const SERVER_REQUESTS: Columns = Columns {
    title: "server requests met",
    counts: &[
        "met",
        "answered",
        "refused",
        "error",
        "never answered",
        "cells",
    ],
    profile: "protocol cases that send it",
    fake: false,
};
const NOTIFICATIONS: Columns = Columns {
    title: "notifications received",
    counts: &["received", "cells"],
    profile: "protocol cases that send it on purpose",
    fake: false,
};
const CLIENT_REQUESTS: Columns = Columns {
    title: "client requests sent",
    counts: &["sent", "answered", "error", "never answered", "cells"],
    profile: "protocol cases that check it",
    fake: true,
};
const CLIENT_NOTIFICATIONS: Columns = Columns {
    title: "client notifications sent",
    counts: &["sent", "cells"],
    profile: "",
    fake: false,
};

fn counts(columns: &Columns, row: &MethodRow) -> Vec<String> {
    let t = &row.tally;
    columns
        .counts
        .iter()
        .map(|name| match *name {
            "met" | "received" | "sent" => t.count,
            "answered" => t.answered,
            "refused" => t.refused,
            "error" => t.error,
            "never answered" => t.never_answered,
            _ => t.cells,
        })
        .map(|n| n.to_string())
        .collect()
}

fn fake_answer(fake: Option<&FakeAnswer>) -> &'static str {
    match fake {
        Some(FakeAnswer::Behaviour) => "by behaviour",
        Some(FakeAnswer::Recorded) => "recorded answer",
        Some(FakeAnswer::Unimplemented(_)) => "-32603",
        None => "—",
    }
}

/// The cells of one row: the method, its counts, what the profile does about it.
fn cells(columns: &Columns, row: &MethodRow, quote: bool) -> Vec<String> {
    let mut cells = vec![if quote {
        format!("`{}`", row.method.replace('|', "\\|"))
    } else {
        row.method.clone()
    }];
    cells.extend(counts(columns, row));
    if columns.fake {
        cells.push(fake_answer(row.fake.as_ref()).to_string());
    }
    if !columns.profile.is_empty() {
        cells.push(if row.profile_cases.is_empty() {
            "—".to_string()
        } else if quote {
            row.profile_cases
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            row.profile_cases.join(" ")
        });
    }
    cells
}

fn headers(columns: &Columns) -> Vec<&'static str> {
    let mut headers = vec![columns.title];
    headers.extend(columns.counts);
    if columns.fake {
        headers.push("the fake answers");
    }
    if !columns.profile.is_empty() {
        headers.push(columns.profile);
    }
    headers
}

/// What a run is, in one line.
fn run_heading(run: &Run) -> String {
    let app_server = match (run.app_server, &run.release) {
        ("fake", Some(release)) => format!("the fake app-server as Codex {release}"),
        ("fake", None) => "the fake app-server".to_string(),
        (_, Some(release)) => format!("the real Codex {release}"),
        (_, None) => "a real Codex".to_string(),
    };
    let mut line = format!(
        "{}: {app_server}; {} cells with a transcript",
        run.runner,
        run.cells.len()
    );
    if !run.without_transcript.is_empty() {
        let without: Vec<String> = run
            .without_transcript
            .iter()
            .map(|(status, n)| format!("{n} {status}"))
            .collect();
        let _ = write!(line, ", without one: {}", without.join(", "));
    }
    if run.recorder_notes > 0 {
        let _ = write!(
            line,
            "; the recorder noted {} lines it did not keep or cut (not counted)",
            run.recorder_notes
        );
    }
    line
}

/// What the profile exercises that the run never met, in lines.
fn not_met_lines(run: &Run, quote: bool) -> Vec<String> {
    let Some(not_met) = &run.not_met else {
        return vec![format!(
            "the protocol profile's coverage is not known here: {}",
            run.profile_missing.as_deref().unwrap_or("-")
        )];
    };
    [
        ("server requests", &not_met.server_requests),
        ("notifications", &not_met.notifications),
    ]
    .into_iter()
    .map(|(what, methods)| {
        if methods.is_empty() {
            format!(
                "met every {} a protocol case sends",
                what.trim_end_matches('s')
            )
        } else {
            format!(
                "{what} a protocol case sends but this driver never met ({}): {}",
                methods.len(),
                methods
                    .iter()
                    .map(|m| if quote { format!("`{m}`") } else { m.clone() })
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    })
    .collect()
}

fn tables(run: &Run) -> [(&'static Columns, &Vec<MethodRow>); 4] {
    [
        (&SERVER_REQUESTS, &run.server_requests),
        (&NOTIFICATIONS, &run.notifications),
        (&CLIENT_REQUESTS, &run.client_requests),
        (&CLIENT_NOTIFICATIONS, &run.client_notifications),
    ]
}

/// Rows padded into columns, indented.
fn aligned(out: &mut String, indent: &str, rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = indent.to_string();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:width$}  ", width = widths[i]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The two forms of the text.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    Terminal,
    Markdown,
}

impl Exercised {
    /// The terminal's table.
    pub fn table(&self) -> String {
        self.render(Style::Terminal)
    }

    /// The Markdown section.
    pub fn markdown(&self) -> String {
        self.render(Style::Markdown)
    }

    fn render(&self, style: Style) -> String {
        let markdown = style == Style::Markdown;
        let mut out = String::new();
        let _ = if markdown {
            writeln!(
                out,
                "## What the drivers of `{}` were exercised on\n\nFrom the transcripts in `{}`.",
                self.drivers_file, self.evidence
            )
        } else {
            writeln!(
                out,
                "What the drivers of {} were exercised on, from the transcripts in {}",
                self.drivers_file, self.evidence
            )
        };
        let (indent, bullet) = if markdown {
            ("", "- ")
        } else {
            ("    ", "    ")
        };
        for driver in &self.drivers {
            let _ = if markdown {
                writeln!(out, "\n### Driver `{}`", driver.driver)
            } else {
                writeln!(out, "\ndriver `{}`", driver.driver)
            };
            if let Some(why) = &driver.nothing_recorded {
                let _ = if markdown {
                    writeln!(out, "\n**Nothing recorded**: {why}")
                } else {
                    writeln!(out, "  NOTHING RECORDED: {why}")
                };
            }
            for run in &driver.runs {
                let _ = if markdown {
                    writeln!(out, "\n#### {}\n", run_heading(run))
                } else {
                    writeln!(out, "  {}", run_heading(run))
                };
                for (columns, rows) in tables(run) {
                    if rows.is_empty() {
                        // A blank line ends the Markdown paragraph before a table.
                        let end = if markdown { "\n" } else { "" };
                        let _ = writeln!(out, "{indent}{}: none{end}", columns.title);
                    } else if markdown {
                        markdown_table(&mut out, columns, rows);
                    } else {
                        let mut lines =
                            vec![headers(columns).iter().map(|h| h.to_string()).collect()];
                        lines.extend(rows.iter().map(|row| cells(columns, row, false)));
                        aligned(&mut out, indent, &lines);
                    }
                }
                for line in not_met_lines(run, markdown) {
                    let _ = writeln!(out, "{bullet}{line}");
                }
            }
        }
        for profile in &self.profiles {
            let _ = writeln!(
                out,
                "\nThe protocol profile on Codex {} (all of it: `harness coverage --codex {}`):",
                profile.release, profile.release
            );
            for line in profile.target_lines() {
                let _ = writeln!(out, "{}{line}", if markdown { "- " } else { "  " });
            }
        }
        out
    }
}

fn markdown_table(out: &mut String, columns: &Columns, rows: &[MethodRow]) {
    let headers = headers(columns);
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(headers.len()));
    for row in rows {
        let _ = writeln!(out, "| {} |", cells(columns, row, true).join(" | "));
    }
    let _ = writeln!(out);
}
