//! The matrix's expectations: each file's baseline entries checked against the cells it may
//! expect, and merged into one baseline.

use crate::baseline::{
    parse_verdict, Baseline, BaselineEntry, BaselineFile, CellPattern, Expectation, VerdictKind,
    SIGNED_VERDICTS,
};
use crate::cell::Cell;
use crate::generate::Extras;
use crate::source::BASELINE_FILE;
use crate::SuitesError;
use std::collections::{BTreeMap, BTreeSet};

/// The baseline of `cells`: the shipped file's entries for the shipped cells, a drivers file's
/// for the cells it adds (`from_drivers_file`).
pub(super) fn baseline(
    cells: &[Cell],
    from_drivers_file: &BTreeSet<String>,
    baseline_file: BaselineFile,
    extras: &Extras,
) -> Result<Baseline, SuitesError> {
    // Each file expects only its own cells: the shipped baseline the shipped matrix's, a
    // drivers file the cells it adds (a shipped pattern never reaches a user's driver).
    let (shipped, added): (Vec<Cell>, Vec<Cell>) = cells
        .iter()
        .cloned()
        .partition(|c| !from_drivers_file.contains(&c.name()));
    let mut entries = BTreeMap::new();
    check_baseline(
        &shipped,
        baseline_file.expected,
        BASELINE_FILE,
        &mut entries,
    )?;
    if let Some(drivers) = &extras.drivers {
        let shipped_names: BTreeSet<String> = shipped.iter().map(Cell::name).collect();
        if let Some(entry) = drivers
            .expected
            .iter()
            .find(|e| shipped_names.contains(&e.cell))
        {
            return Err(match entries.get(&entry.cell) {
                Some((_, other)) => SuitesError::DuplicateBaselineCell {
                    file: drivers.name.clone(),
                    cell: entry.cell.clone(),
                    other: other.clone(),
                },
                None => SuitesError::UnknownBaselineCell {
                    file: drivers.name.clone(),
                    cell: entry.cell.clone(),
                    why: "it is a cell of the shipped matrix, not one this drivers file adds; suites/baseline.toml decides its expectation".into(),
                },
            });
        }
        check_baseline(
            &added,
            drivers.expected.clone(),
            &drivers.name,
            &mut entries,
        )?;
    }
    Ok(Baseline {
        entries: entries.into_iter().map(|(k, (e, _))| (k, e)).collect(),
    })
}

/// Check one file's baseline entries against the cells and add them to `entries` (cell →
/// expectation and the entry that listed it). An entry names one cell, or a pattern of them
/// (`*` in a part stands for any text without a dot): one reason for every cell it matches.
/// Within a file a later entry overrides an earlier one for the cells both match (a pattern
/// first, its exceptions after it); an entry that decides no cell — it matches none, or every
/// cell it matches is listed again later — is an error, so no entry is dead. A cell another file
/// already lists is an error: a drivers file cannot override the shipped baseline.
fn check_baseline(
    cells: &[Cell],
    listed: Vec<BaselineEntry>,
    source: &str,
    entries: &mut BTreeMap<String, (Expectation, String)>,
) -> Result<(), SuitesError> {
    let file = || source.to_string();
    // cell name → (index of the entry deciding it, its expectation)
    let mut decided: BTreeMap<String, (usize, Expectation)> = BTreeMap::new();
    let mut patterns = Vec::with_capacity(listed.len());
    for (index, entry) in listed.iter().enumerate() {
        let pattern =
            CellPattern::parse(&entry.cell).map_err(|why| SuitesError::UnknownBaselineCell {
                file: file(),
                cell: entry.cell.clone(),
                why,
            })?;
        let matched: Vec<&Cell> = cells.iter().filter(|c| pattern.matches(&c.id)).collect();
        let applicable: Vec<&Cell> = matched
            .iter()
            .copied()
            .filter(|c| c.not_applicable.is_none())
            .collect();
        if applicable.is_empty() {
            let why = match (pattern.is_exact(), matched.first()) {
                (true, None) => "no suite's matrix expands to it".to_string(),
                (false, None) => "the pattern matches no cell of the matrix".to_string(),
                (true, Some(cell)) => format!(
                    "the cell is not applicable, so it has no verdict to expect: {}",
                    cell.not_applicable.as_deref().unwrap_or_default()
                ),
                (false, Some(_)) => "every cell the pattern matches is not applicable, so none has a verdict to expect".to_string(),
            };
            return Err(SuitesError::UnknownBaselineCell {
                file: file(),
                cell: entry.cell.clone(),
                why,
            });
        }
        let expectation = check_entry_verdict(entry, source)?;
        for cell in applicable {
            let name = cell.name();
            if let Some((_, other)) = entries.get(&name) {
                return Err(SuitesError::DuplicateBaselineCell {
                    file: file(),
                    cell: name,
                    other: other.clone(),
                });
            }
            decided.insert(name, (index, expectation.clone()));
        }
        patterns.push(pattern);
    }
    for (index, entry) in listed.iter().enumerate() {
        if !decided.values().any(|(by, _)| *by == index) {
            let later = listed[index + 1..]
                .iter()
                .zip(&patterns[index + 1..])
                .filter(|(_, p)| {
                    cells
                        .iter()
                        .any(|c| patterns[index].matches(&c.id) && p.matches(&c.id))
                })
                .map(|(e, _)| format!("`{}`", e.cell))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SuitesError::DeadBaselineEntry {
                file: file(),
                entry: entry.cell.clone(),
                later,
            });
        }
    }
    for (name, (index, expectation)) in decided {
        let by = if patterns[index].is_exact() {
            file()
        } else {
            format!("{} (pattern `{}`)", file(), listed[index].cell)
        };
        entries.insert(name, (expectation, by));
    }
    Ok(())
}

/// The expectation one entry states, checked: a real verdict other than `pass`, a reason, and
/// the signature where a signature decides the verdict.
fn check_entry_verdict(entry: &BaselineEntry, source: &str) -> Result<Expectation, SuitesError> {
    let bad = |verdict: &str, why: &str| SuitesError::BadBaselineVerdict {
        file: source.to_string(),
        cell: entry.cell.clone(),
        verdict: verdict.to_string(),
        why: why.to_string(),
    };
    let Some(verdict) = parse_verdict(&entry.verdict) else {
        return Err(bad(
            &entry.verdict,
            "not a verdict name (see graders::verdict::VerdictKind)",
        ));
    };
    if verdict == VerdictKind::Pass {
        return Err(bad(
            &entry.verdict,
            "pass is the default; list only cells expected not to pass",
        ));
    }
    if entry.reason.trim().is_empty() {
        return Err(bad(
            &entry.verdict,
            "the reason is empty; say why this verdict is expected",
        ));
    }
    if SIGNED_VERDICTS.contains(&verdict) && entry.signature.is_none() {
        return Err(bad(
            &entry.verdict,
            "a signature decides this verdict; name the one expected (`signature = \"…\"`, a row of graders::signatures::SIGNATURES)",
        ));
    }
    if let Some(name) = &entry.signature {
        if !graders::signatures::SIGNATURES
            .iter()
            .any(|s| s.name == name)
        {
            return Err(bad(
                &entry.verdict,
                &format!("signature `{name}` is not a row of graders::signatures::SIGNATURES"),
            ));
        }
    }
    Ok(Expectation {
        verdict,
        reason: Some(entry.reason.clone()),
        signature: entry.signature.clone(),
        declarations: None,
    })
}
