//! The driver's own run events (the `events` contract) as a second source next to the wire.
//! The wire's events stay; from the driver's the merge takes only what the wire cannot show:
//! its `result.proposed` (what it told its user, when the wire shows no result), its
//! diagnostics, its launch identity, and whether it offered a Retry (`run.ended.retry_offered`
//! and `error_code`, when its ending agrees with the wire's). Every disagreement is a finding.

use super::Translation;
use crate::events::{Body, Item, RunEnded};
use std::collections::BTreeSet;

fn ending_name(ended: &RunEnded) -> &'static str {
    crate::grade::ending_name(ended.ending)
}

/// Session threads reported open, sessions rejected, and command executions completed.
#[derive(Default)]
struct Facts {
    started: BTreeSet<String>,
    rejected: usize,
    commands: BTreeSet<String>,
    turns: BTreeSet<(String, String)>,
}

fn facts(events: &[Body]) -> Facts {
    let mut facts = Facts::default();
    for body in events {
        match body {
            Body::SessionStarted(s) => {
                facts.started.insert(s.thread_id.clone());
            }
            Body::SessionRejected(_) => facts.rejected += 1,
            Body::ItemCompleted(ev) => {
                if let Item::CommandExecution(c) = &ev.item {
                    facts.commands.insert(format!("{} ({})", c.id, c.status));
                }
            }
            Body::TurnCompleted(t) => {
                facts.turns.insert((t.turn_id.clone(), t.status.clone()));
            }
            _ => {}
        }
    }
    facts
}

/// Merge the driver's events into the wire's translation, recording each disagreement.
pub fn with_driver_events(
    mut wire: Translation,
    driver: &[Body],
    driver_terminal: Option<&RunEnded>,
) -> Translation {
    let seen = facts(&wire.events);
    let said = facts(driver);
    let mut findings = Vec::new();
    for thread in said.started.difference(&seen.started) {
        findings.push(format!(
            "the driver reported session {thread} open; the wire shows no thread/start or thread/resume result for it"
        ));
    }
    if said.rejected != seen.rejected {
        findings.push(format!(
            "the driver reported {} rejected session start(s); the wire shows {}",
            said.rejected, seen.rejected
        ));
    }
    for command in said.commands.difference(&seen.commands) {
        findings.push(format!(
            "the driver reported command {command}; the wire does not show that outcome"
        ));
    }
    for (turn, status) in said.turns.difference(&seen.turns) {
        findings.push(format!(
            "the driver reported turn {turn} {status}; the wire does not show that"
        ));
    }
    let wire_has_result = wire
        .events
        .iter()
        .any(|b| matches!(b, Body::ResultProposed(_)));
    for body in driver {
        match body {
            Body::ResultProposed(_) if !wire_has_result => wire.events.push(body.clone()),
            Body::Diagnostic(_) => wire.events.push(body.clone()),
            Body::RunStarted(started) => {
                if let Some(Body::RunStarted(ours)) = wire.events.first_mut() {
                    if !started.launch.identity.is_empty() {
                        ours.launch.identity = started.launch.identity.clone();
                    }
                }
            }
            _ => {}
        }
    }
    match driver_terminal {
        Some(theirs) if theirs.ending == wire.terminal.ending => {
            wire.terminal.retry_offered = theirs.retry_offered;
            if theirs.error_code.is_some() {
                wire.terminal.error_code = theirs.error_code.clone();
            }
            if theirs.reason.is_some() {
                wire.terminal.reason = theirs.reason.clone();
            }
        }
        Some(theirs) => findings.push(format!(
            "the driver reported the run {} ({}); the wire shows it {} ({})",
            ending_name(theirs),
            theirs.reason.as_deref().unwrap_or("-"),
            ending_name(&wire.terminal),
            wire.terminal.reason.as_deref().unwrap_or("-"),
        )),
        None => findings.push("the driver wrote no run.ended of its own".into()),
    }
    wire.findings.extend(findings);
    wire
}
