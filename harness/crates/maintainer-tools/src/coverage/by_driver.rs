//! `harness coverage --drivers FILE [--out DIR]`: what each driver of a drivers file was
//! exercised on in a run, from the evidence the run left. Per driver and app-server (its runner:
//! the fake, the fake playing another release, each real Codex), read from every cell's
//! transcript (the tap's recording, docs/events.md "The transcript"): the server requests the
//! driver met and how it answered them, the notifications it received, the client requests it
//! sent and how the app-server answered — each beside the protocol cases that exercise it
//! ([`super::coverage`] of the app-server's release), and the profile's server requests and
//! notifications the driver never met.
//!
//! Fail closed: an evidence folder that does not exist is an error naming it, a transcript that
//! cannot be read is an error naming the file, and a driver of the file with no cell in the
//! folder — or no cell that recorded a transcript — is said so, never an empty table.

use super::{coverage, Coverage, FakeAnswer, NO_RELEASE};
use anyhow::{Context, Result};
use graders::events::CellId;
use graders::wire::transcript::{self, Direction, Record};
use report::layout::CellEvidence;
use report::verdict_file::VerdictFile;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use suites::spec::AppServerKind;
use suites::{DriversFile, Extras};

/// Distinct methods kept per table of a run: a driver's lines are untrusted, and a flood of
/// invented methods must not grow the report; the rest are counted under [`OTHER_METHODS`].
const MAX_METHODS: usize = 500;
const OTHER_METHODS: &str = "(other methods, past the table's bound)";
/// Longest method name kept as it is; a longer one is cut and marked.
const MAX_METHOD_BYTES: usize = 200;

/// How often a method came up in a run, and how it was answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Tally {
    /// Requests sent, or notifications received.
    pub(crate) count: u64,
    /// Requests answered with a result (for a server request: one that does not refuse).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) answered: u64,
    /// Server requests answered with a result that refuses (a decision or action the graders
    /// count as a refusal: `graders::grade::REFUSING_DECISIONS`).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) refused: u64,
    /// Requests answered with a JSON-RPC error (or with neither a result nor an error).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) error: u64,
    /// Requests with no answer on their launch by the end of the transcript.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) never_answered: u64,
    /// The cells it came up in.
    pub(crate) cells: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One method of a run's table, with what the protocol profile does about it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MethodRow {
    pub(crate) method: String,
    #[serde(flatten)]
    pub(crate) tally: Tally,
    /// The protocol cases whose scenario makes the app-server send it (server requests and
    /// notifications), or that check how drivers use it (client requests).
    pub(crate) profile_cases: Vec<String>,
    /// How the fake answers the client request, for a client request of a release the fake
    /// plays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fake: Option<FakeAnswer>,
}

/// What the profile exercises that a run never met.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct NotMet {
    pub(crate) server_requests: Vec<String>,
    pub(crate) notifications: Vec<String>,
}

/// One driver against one app-server: its runner's cells in the folder.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Run {
    pub(crate) runner: String,
    /// `fake` or `codex`.
    pub(crate) app_server: &'static str,
    /// The release the app-server speaks (the one the fake plays; the real Codex's version);
    /// `None` when the runner is not in the matrix the drivers file builds and its name does
    /// not say.
    pub(crate) release: Option<String>,
    /// Cells whose transcript was read.
    pub(crate) cells: Vec<String>,
    /// Cells in the folder without a transcript (never run, or the driver never started its
    /// app-server), counted by their status in `verdict.json`.
    pub(crate) without_transcript: BTreeMap<String, u64>,
    /// Notes of the recorder in the transcripts (a line not kept, a cut, a driver that stopped
    /// reading): the counts leave out lines it did not keep.
    pub(crate) recorder_notes: u64,
    pub(crate) server_requests: Vec<MethodRow>,
    pub(crate) notifications: Vec<MethodRow>,
    pub(crate) client_requests: Vec<MethodRow>,
    pub(crate) client_notifications: Vec<MethodRow>,
    /// What the profile of `release` exercises that this run never met; `None` with
    /// `profile_missing` when the profile's coverage of the release is not known here.
    pub(crate) not_met: Option<NotMet>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) profile_missing: Option<String>,
}

/// One driver of the drivers file.
#[derive(Debug, Clone, Serialize)]
pub struct DriverRuns {
    pub(crate) driver: String,
    /// Why there is nothing to show, when there is not: no cell of the driver in the folder,
    /// or none that recorded a transcript.
    pub nothing_recorded: Option<String>,
    pub(crate) runs: Vec<Run>,
}

/// `harness coverage --drivers`.
#[derive(Debug, Clone, Serialize)]
pub struct Exercised {
    pub(crate) drivers_file: String,
    pub(crate) evidence: String,
    pub(crate) drivers: Vec<DriverRuns>,
    /// The profile's coverage of each release the runs' app-servers speak.
    pub(crate) profiles: Vec<Coverage>,
}

impl Exercised {
    /// The drivers the folder shows nothing of.
    pub fn unrecorded(&self) -> Vec<&DriverRuns> {
        self.drivers
            .iter()
            .filter(|d| d.nothing_recorded.is_some())
            .collect()
    }
}

/// One table's tallies, bounded in its methods.
#[derive(Debug, Default)]
struct Table(BTreeMap<String, Tally>);

impl Table {
    /// The key `method` is counted under: its name (cut when long), or [`OTHER_METHODS`] once
    /// the table is full.
    fn key(&self, method: &str) -> String {
        let name = report::cause::head(method, MAX_METHOD_BYTES);
        if self.0.contains_key(&name) || self.0.len() < MAX_METHODS {
            name
        } else {
            OTHER_METHODS.to_string()
        }
    }

    fn at(&mut self, key: String) -> &mut Tally {
        self.0.entry(key).or_default()
    }
}

/// The tallies of one runner's cells: a table per kind of line.
#[derive(Debug, Default)]
struct Tallies {
    /// By [`Kind`].
    tables: [Table; 4],
    recorder_notes: u64,
}

/// What a line with a method is, by who sent it and whether it has an id.
#[derive(Debug, Clone, Copy)]
enum Kind {
    ServerRequest = 0,
    Notification = 1,
    ClientRequest = 2,
    ClientNotification = 3,
}

/// How the driver's result to a server request answers it.
fn refuses(result: &Value) -> bool {
    // An approval's decision, or an elicitation's action (`decline`, `cancel`).
    let decision = graders::wire::decision_of(result).or_else(|| {
        result
            .get("action")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    decision.is_some_and(|d| graders::grade::REFUSING_DECISIONS.contains(&d.as_str()))
}

fn id_key(launch: u64, id: &Value) -> (u64, String) {
    (launch, id.to_string())
}

impl Tallies {
    fn table(&mut self, kind: Kind) -> &mut Table {
        &mut self.tables[kind as usize]
    }

    /// Add one cell's transcript.
    fn add(&mut self, records: &[Record]) {
        // The requests of each side still waiting for an answer, by launch and id: the server's
        // wait for the driver, the driver's for the server.
        let mut pending: [HashMap<(u64, String), String>; 2] = Default::default();
        let mut seen: [BTreeSet<String>; 4] = Default::default();
        for record in records {
            let (launch, direction, message) = match record {
                Record::Message {
                    launch,
                    direction,
                    message,
                    ..
                } => (*launch, *direction, message),
                Record::Note { .. } => {
                    self.recorder_notes += 1;
                    continue;
                }
                _ => continue,
            };
            let id = message.get("id").filter(|id| !id.is_null());
            let from_server = direction == Direction::Out;
            if let Some(method) = message.get("method").and_then(Value::as_str) {
                let kind = match (from_server, id.is_some()) {
                    (true, true) => Kind::ServerRequest,
                    (true, false) => Kind::Notification,
                    (false, true) => Kind::ClientRequest,
                    (false, false) => Kind::ClientNotification,
                };
                let table = self.table(kind);
                let key = table.key(method);
                table.at(key.clone()).count += 1;
                if let Some(id) = id {
                    pending[usize::from(!from_server)].insert(id_key(launch, id), key.clone());
                }
                seen[kind as usize].insert(key);
                continue;
            }
            // An answer: the driver's to a server request, or the server's to a client
            // request (an id never asked is no answer to count).
            let Some(id) = id else { continue };
            let (waiting, kind) = if from_server {
                (&mut pending[1], Kind::ClientRequest)
            } else {
                (&mut pending[0], Kind::ServerRequest)
            };
            let Some(key) = waiting.remove(&id_key(launch, id)) else {
                continue;
            };
            let tally = self.table(kind).at(key);
            match message.get("result") {
                Some(result) if message.get("error").is_none() => {
                    if !from_server && refuses(result) {
                        tally.refused += 1;
                    } else {
                        tally.answered += 1;
                    }
                }
                _ => tally.error += 1,
            }
        }
        let [server_waits, client_waits] = pending;
        for (kind, waits) in [
            (Kind::ServerRequest, server_waits),
            (Kind::ClientRequest, client_waits),
        ] {
            for key in waits.into_values() {
                self.table(kind).at(key).never_answered += 1;
            }
        }
        for (table, keys) in self.tables.iter_mut().zip(seen) {
            for key in keys {
                table.at(key).cells += 1;
            }
        }
    }
}

/// A dashed version of a runner name (`0-171-0`) read back, when it is plain numbers.
fn undashed(dashed: &str) -> Option<String> {
    let parts: Vec<&str> = dashed.split('-').collect();
    (parts.len() == 3 && parts.iter().all(|p| p.parse::<u64>().is_ok())).then(|| parts.join("."))
}

/// The driver of the file a runner belongs to (`NAME-fake`, `NAME-fake-V`, `NAME-codex`,
/// `NAME-codex-V`; `suites::generate`), the longest name when several fit.
fn driver_of<'a>(
    runner: &str,
    drivers: &'a BTreeMap<String, suites::spec::DeclaredDriver>,
) -> Option<&'a str> {
    drivers
        .keys()
        .filter(|name| {
            runner
                .strip_prefix(name.as_str())
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|rest| {
                    ["fake", "codex"].iter().any(|kind| {
                        rest == *kind || rest.strip_prefix(kind).is_some_and(|v| v.starts_with('-'))
                    })
                })
        })
        .max_by_key(|name| name.len())
        .map(String::as_str)
}

/// The app-server of `runner` and the release it speaks: from the matrix the drivers file
/// builds, else from the runner's name (a version the run added with `--codex`).
fn app_server_of(
    matrix: &suites::Matrix,
    driver: &str,
    runner: &str,
) -> (AppServerKind, Option<String>) {
    if let Some(spec) = matrix.file.runners.get(runner) {
        return match spec.app_server {
            AppServerKind::Fake => (
                AppServerKind::Fake,
                Some(
                    spec.plays
                        .clone()
                        .unwrap_or_else(|| fake_app_server::persona::DEFAULT_VERSION.to_string()),
                ),
            ),
            AppServerKind::Codex => (AppServerKind::Codex, spec.codex_version.clone()),
        };
    }
    let rest = &runner[driver.len() + 1..];
    match rest.strip_prefix("fake-") {
        Some(version) => (AppServerKind::Fake, undashed(version)),
        None => (
            AppServerKind::Codex,
            rest.strip_prefix("codex-").and_then(undashed),
        ),
    }
}

/// The cell folders directly in `out`, by name (a link is no folder of the run).
fn cell_folders(out: &Path) -> Result<Vec<CellId>> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(out)
        .with_context(|| format!("listing the evidence folder {}", out.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", out.display()))?;
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Ok(id) = entry.file_name().to_string_lossy().parse::<CellId>() {
            found.push(id);
        }
    }
    found.sort_by_key(ToString::to_string);
    Ok(found)
}

/// The records of a cell's transcript; `None` when the cell has none.
fn read_transcript(evidence: &CellEvidence) -> Result<Option<Vec<Record>>> {
    let path = evidence.transcript();
    let Some(file) =
        graders::evidence_file::open(&path, graders::evidence_file::MAX_STREAMED_BYTES)?
    else {
        return Ok(None);
    };
    transcript::read(std::io::BufReader::new(file))
        .map(Some)
        .with_context(|| format!("reading {}", path.display()))
}

/// Why a cell has no transcript, in a word: its status in `verdict.json`.
fn status_without_transcript(evidence: &CellEvidence) -> String {
    match VerdictFile::read(evidence) {
        Ok(Some(file)) => file.status.name(),
        Ok(None) => "no verdict.json".into(),
        Err(_) => "unreadable verdict.json".into(),
    }
}

/// One runner's cells in the folder: those read, those without a transcript (by status), and
/// the tallies of the transcripts.
#[derive(Debug, Default)]
struct Gathered {
    cells: Vec<String>,
    without: BTreeMap<String, u64>,
    tallies: Tallies,
}

/// What each driver of the drivers file at `drivers` was exercised on in the evidence folder
/// `out`.
pub fn exercised(drivers: &Path, out: &Path) -> Result<Exercised> {
    anyhow::ensure!(
        out.is_dir(),
        "the evidence folder {} does not exist (or is not a folder): give the `--out` of the `harness run --drivers` whose coverage you want",
        out.display()
    );
    let file = DriversFile::read(drivers)?;
    let matrix = suites::load_with(&Extras {
        drivers: Some(file.clone()),
        codex_versions: Vec::new(),
    })?;
    // Per driver, per runner: its cells and tallies.
    let mut gathered: BTreeMap<&str, BTreeMap<String, Gathered>> = BTreeMap::new();
    for id in cell_folders(out)? {
        let Some(driver) = driver_of(&id.runner, &file.drivers) else {
            continue;
        };
        let run = gathered
            .entry(driver)
            .or_default()
            .entry(id.runner.clone())
            .or_default();
        let evidence = CellEvidence::of(out, &id.to_string());
        match read_transcript(&evidence)? {
            Some(records) => {
                run.tallies.add(&records);
                run.cells.push(id.to_string());
            }
            None => {
                *run.without
                    .entry(status_without_transcript(&evidence))
                    .or_default() += 1
            }
        }
    }
    let mut profiles: BTreeMap<String, std::result::Result<Coverage, String>> = BTreeMap::new();
    let mut drivers_out = Vec::new();
    for driver in file.drivers.keys() {
        let mut runs = Vec::new();
        for (runner, found) in gathered.remove(driver.as_str()).unwrap_or_default() {
            let (kind, release) = app_server_of(&matrix, driver, &runner);
            let profile = release.as_ref().map(|release| {
                profiles
                    .entry(release.clone())
                    .or_insert_with(|| coverage(release).map_err(|e| format!("{e:#}")))
                    .clone()
            });
            runs.push(run(runner, kind, release, found, profile));
        }
        // The fake first, then the real Codex by version.
        runs.sort_by_key(|r| (r.app_server != "fake", r.runner.clone()));
        let nothing_recorded = if runs.is_empty() {
            Some(format!(
                "no cell of driver `{driver}` in {}: run `harness run --drivers {} --out {}` first",
                out.display(),
                file.name,
                out.display()
            ))
        } else if runs.iter().all(|r| r.cells.is_empty()) {
            Some(format!(
                "no cell of driver `{driver}` in {} recorded a transcript (its cells there: {})",
                out.display(),
                runs.iter()
                    .flat_map(|r| r.without_transcript.iter())
                    .map(|(status, n)| format!("{n} {status}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        } else {
            None
        };
        drivers_out.push(DriverRuns {
            driver: driver.clone(),
            nothing_recorded,
            runs,
        });
    }
    Ok(Exercised {
        drivers_file: file.name.clone(),
        evidence: out.display().to_string(),
        drivers: drivers_out,
        profiles: profiles.into_values().filter_map(|p| p.ok()).collect(),
    })
}

fn case_names(cases: &[super::CaseRef]) -> Vec<String> {
    cases.iter().map(|c| c.case.clone()).collect()
}

/// A run's tables, each method beside what the profile does about it.
fn run(
    runner: String,
    kind: AppServerKind,
    release: Option<String>,
    found: Gathered,
    profile: Option<std::result::Result<Coverage, String>>,
) -> Run {
    let Gathered {
        cells,
        without: without_transcript,
        tallies,
    } = found;
    let profile_missing = match &profile {
        None => Some("the runner's release is not known: it is not in the matrix the drivers file builds (a `--codex` version with a pre-release?)".to_string()),
        Some(Err(why)) => Some(why.clone()),
        Some(Ok(_)) => None,
    };
    let profile = profile.and_then(|p| p.ok());
    let sent_cases = |sent: Option<&Vec<super::Sent>>, method: &str| -> Vec<String> {
        sent.into_iter()
            .flatten()
            .find(|s| s.method.strip_suffix(NO_RELEASE).unwrap_or(&s.method) == method)
            .map(|s| case_names(&s.cases))
            .unwrap_or_default()
    };
    let rows = |table: Table, sent: Option<&Vec<super::Sent>>| -> Vec<MethodRow> {
        table
            .0
            .into_iter()
            .map(|(method, tally)| MethodRow {
                profile_cases: sent_cases(sent, &method),
                method,
                tally,
                fake: None,
            })
            .collect()
    };
    let [server_requests, notifications, client_requests, client_notifications] = tallies.tables;
    let server_requests = rows(
        server_requests,
        profile.as_ref().map(|p| &p.server_requests),
    );
    let notifications = rows(notifications, profile.as_ref().map(|p| &p.notifications));
    let client_of = |method: &str| {
        profile
            .as_ref()
            .and_then(|p| p.client_requests.as_ref())
            .and_then(|c| c.iter().find(|r| r.method == method))
    };
    let client_requests = client_requests
        .0
        .into_iter()
        .map(|(method, tally)| {
            let known = client_of(&method);
            MethodRow {
                profile_cases: known.map(|c| c.checked_by.clone()).unwrap_or_default(),
                fake: known.map(|c| c.fake.clone()),
                method,
                tally,
            }
        })
        .collect();
    let client_notifications = rows(client_notifications, None);
    let not_met = profile.as_ref().map(|p| {
        let missing = |sent: &[super::Sent], met: &[MethodRow]| -> Vec<String> {
            sent.iter()
                .filter(|s| !s.cases.is_empty())
                .map(|s| s.method.strip_suffix(NO_RELEASE).unwrap_or(&s.method))
                .filter(|m| !met.iter().any(|r| r.method == *m))
                .map(str::to_string)
                .collect()
        };
        NotMet {
            server_requests: missing(&p.server_requests, &server_requests),
            notifications: missing(&p.notifications, &notifications),
        }
    });
    Run {
        runner,
        app_server: match kind {
            AppServerKind::Fake => "fake",
            AppServerKind::Codex => "codex",
        },
        release,
        cells,
        without_transcript,
        recorder_notes: tallies.recorder_notes,
        server_requests,
        notifications,
        client_requests,
        client_notifications,
        not_met,
        profile_missing,
    }
}

#[cfg(test)]
#[path = "by_driver_tests.rs"]
mod tests;
