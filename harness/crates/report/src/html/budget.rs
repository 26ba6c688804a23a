//! report.html's size. The cells' timelines are most of the page (the shipped matrix's report
//! was 85 MB, two delta-burst cells 24.6 MB each), so the report keeps
//! [`REPORT_TIMELINE_BYTES`] of timeline in all, shared between the cells: the red cells
//! first, then the others in even shares of what is left (a cell wanting less than an even
//! share leaves the rest to the others). Within its share a page keeps its cited entries
//! always, then as many entries as fit from the head and the tail of its timeline (at least
//! [`MIN_ENTRIES_EACH_END`] each, at most [`MAX_TIMELINE_ENTRIES`] in all) with one note where
//! the others were, saying which lines of which files they are; then whole messages (bodies)
//! in timeline order while they fit. A row without its body keeps its one-line summary, and
//! its file and line; the evidence files, linked from the page, hold everything.

use super::cell::CellPage;
use super::timeline::Entry;
use std::collections::BTreeMap;

/// Timeline kept in one report, all cells together (entries and their bodies, as JSON).
pub const REPORT_TIMELINE_BYTES: usize = 5 << 20;
/// Most timeline one cell keeps, whatever is left of the report's budget.
pub(super) const MAX_CELL_TIMELINE_BYTES: usize = 4 << 20;
/// Most entries one page keeps (cited ones besides).
pub const MAX_TIMELINE_ENTRIES: usize = 2_000;
/// Entries kept at each end of a timeline however small the page's share.
pub const MIN_ENTRIES_EACH_END: usize = 20;

/// Give each page its share of [`REPORT_TIMELINE_BYTES`] and cut its timeline to it.
pub(super) fn fit(pages: &mut [CellPage]) {
    let wanted: Vec<usize> = pages
        .iter()
        .map(|page| wanted_bytes(&page.timeline).min(MAX_CELL_TIMELINE_BYTES))
        .collect();
    let mut shares = vec![0; pages.len()];
    let mut left = REPORT_TIMELINE_BYTES;
    for red in [true, false] {
        let group: Vec<usize> = (0..pages.len())
            .filter(|&i| is_red(&pages[i]) == red)
            .collect();
        left -= share_out(&wanted, &group, left, &mut shares);
    }
    for (page, share) in pages.iter_mut().zip(shares) {
        fit_page(page, share);
    }
}

/// A red cell's page (its verdict differs from the baseline, or is a failure, or the harness
/// erred): it is read first, so it is kept first.
fn is_red(page: &CellPage) -> bool {
    !matches!(
        page.status.as_str(),
        "as-expected" | "ignored" | "not-applicable"
    ) || matches!(page.verdict.as_deref(), Some("fail" | "incomplete"))
}

/// An entry's bytes in the page without its body (its JSON array's other fields).
fn bare_bytes(entry: &Entry) -> usize {
    const FIELDS: usize = 48;
    entry.title.len() + entry.text.len() + entry.file.len() + entry.src.len() + FIELDS
}

fn wanted_bytes(timeline: &[Entry]) -> usize {
    timeline.iter().map(|e| bare_bytes(e) + e.body.len()).sum()
}

/// Split `budget` between the `group`'s pages as evenly as their wants allow; returns what was
/// given.
fn share_out(wanted: &[usize], group: &[usize], budget: usize, shares: &mut [usize]) -> usize {
    let mut order = group.to_vec();
    order.sort_by_key(|&i| wanted[i]);
    let mut left = budget;
    for (given, &page) in order.iter().enumerate() {
        let even = left / (order.len() - given);
        shares[page] = wanted[page].min(even);
        left -= shares[page];
    }
    budget - left
}

fn fit_page(page: &mut CellPage, share: usize) {
    let entries = std::mem::take(&mut page.timeline);
    let total = entries.len();
    let mut used: usize = entries
        .iter()
        .filter(|e| e.cited)
        .map(|e| bare_bytes(e) + e.body.len())
        .sum();
    // Which of the other entries stay: from both ends inwards while they fit.
    let others: Vec<usize> = (0..total).filter(|&i| !entries[i].cited).collect();
    let mut keep = vec![false; total];
    let (mut from_head, mut from_tail) = (0, others.len());
    while from_head < from_tail && from_head + (others.len() - from_tail) < MAX_TIMELINE_ENTRIES {
        let (index, at_head) = if from_head <= others.len() - from_tail {
            (others[from_head], true)
        } else {
            (others[from_tail - 1], false)
        };
        let cost = bare_bytes(&entries[index]);
        let end = if at_head {
            from_head
        } else {
            others.len() - from_tail
        };
        if used + cost > share && end >= MIN_ENTRIES_EACH_END {
            break;
        }
        used += cost;
        keep[index] = true;
        if at_head {
            from_head += 1;
        } else {
            from_tail -= 1;
        }
    }
    let mut kept = Vec::with_capacity(total.min(MAX_TIMELINE_ENTRIES + 1));
    let mut omitted: BTreeMap<&'static str, (usize, usize, usize)> = BTreeMap::new();
    let mut gap_at = None;
    for (index, entry) in entries.into_iter().enumerate() {
        if entry.cited || keep[index] {
            kept.push(entry);
            continue;
        }
        gap_at.get_or_insert(kept.len());
        let (count, first, last) = omitted
            .entry(entry.file)
            .or_insert((0, entry.line, entry.line));
        *count += 1;
        *first = (*first).min(entry.line);
        *last = (*last).max(entry.line);
    }
    // Bodies, in timeline order, while they fit.
    let mut dropped = 0;
    for entry in kept.iter_mut().filter(|e| !e.cited) {
        if used + entry.body.len() <= share {
            used += entry.body.len();
        } else if !entry.body.is_empty() {
            entry.body.clear();
            dropped += 1;
        }
    }
    if dropped > 0 {
        page.notes.push(format!(
            "{dropped} timeline entries show only their summary: the report keeps a bounded share of each cell's messages (the evidence files hold everything)"
        ));
    }
    if let Some(at) = gap_at {
        let files: Vec<String> = omitted
            .iter()
            .map(|(file, (count, first, last))| {
                format!("{file} lines {first}–{last} ({count} entries)")
            })
            .collect();
        let text = format!(
            "not in the report: {}; the evidence files hold them",
            files.join(", ")
        );
        page.notes.push(text.clone());
        let (file, line) = omitted
            .iter()
            .max_by_key(|(_, (count, _, _))| *count)
            .map_or(("", 0), |(file, (_, first, _))| (*file, *first));
        kept.insert(
            at,
            Entry {
                t: None,
                src: "note",
                seq: None,
                file,
                line,
                title: "not in the report".into(),
                text: text.clone(),
                body: text,
                cited: false,
            },
        );
    }
    page.timeline = kept;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_wants_are_met_and_the_rest_is_shared_evenly() {
        let wanted = [10, 1_000, 1_000, 50];
        let mut shares = [0; 4];
        let given = share_out(&wanted, &[0, 1, 2, 3], 1_060, &mut shares);
        assert_eq!(shares, [10, 500, 500, 50]);
        assert_eq!(given, 1_060);
        let mut shares = [0; 4];
        assert_eq!(share_out(&wanted, &[1, 3], 10_000, &mut shares), 1_050);
        assert_eq!(shares, [0, 1_000, 0, 50]);
    }
}
