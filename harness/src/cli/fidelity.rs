//! `harness fidelity`: the fake app-server against the real Codex, scenario by scenario, in every
//! environment that can run here. Prints one table row per pair; a verdict mismatch or a
//! divergence in the driver-visible message sequence is a fidelity failure naming the first
//! diverging message. Also reports, per real-Codex cell, the time spent in Codex versus in the
//! harness.

use maintainer_tools::fidelity::{self, Pair, PairOutcome};
use matrix::context::CellContext;
use matrix::paths;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only pairs whose name (`suite.runner-fake~runner-codex.environment.case`) contains one of
    /// these.
    pub filters: Vec<String>,
    /// Folder for the cells' evidence (default: `<conformance>/fidelity`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<std::path::PathBuf>,
    /// List the pairs without running them.
    #[arg(long)]
    pub list: bool,
    /// Also pair the drivers of this drivers file (`NAME-fake` ~ `NAME-codex`), as `harness run
    /// --drivers` runs them (e.g. `drivers/published.toml`).
    #[arg(long, value_parser = super::absolute_path)]
    pub drivers: Option<std::path::PathBuf>,
    /// Pairs run at once (each runs its fake cell, then its real-Codex cell).
    #[arg(long, short = 'j', default_value_t = 2, value_parser = super::jobs)]
    pub jobs: usize,
}

pub fn main(args: Args) -> ExitCode {
    let repo_root = paths::repo_root();
    let loaded = matrix::load::load_matrix(args.drivers.as_deref(), &[], repo_root.as_deref());
    let matrix = match loaded {
        Ok(matrix) => matrix,
        Err(e) => {
            eprintln!("harness fidelity: {e:#}");
            return ExitCode::from(2);
        }
    };
    let pairs = fidelity::pairs(&matrix, &args.filters);
    if pairs.is_empty() {
        eprintln!("harness fidelity: no pair matches {:?}", args.filters);
        return ExitCode::from(2);
    }
    if args.list {
        for pair in &pairs {
            println!("{}  ({})", pair.name(), pair.scenario());
        }
        return ExitCode::SUCCESS;
    }
    let mut ctx = match CellContext::from_env() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("harness fidelity: {e:#}");
            return ExitCode::from(2);
        }
    };
    ctx.out_root = args
        .out
        .unwrap_or_else(|| paths::conformance_root().join("fidelity"));
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("harness fidelity: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let ci = ctx.ci;
    let outcomes = runtime.block_on(run_pairs(&pairs, Arc::new(ctx), args.jobs.max(1)));
    sandbox::teardown::tear_down_everything();
    print!("{}", table(&outcomes));
    let failures = outcomes.iter().filter(|o| o.failure().is_some()).count();
    let errors = outcomes
        .iter()
        .filter(|o| o.fake.verdict.starts_with("error") || o.real.verdict.starts_with("error"))
        .count();
    if ci {
        let ignored = outcomes.iter().filter(|o| !o.compared()).count();
        if ignored > 0 {
            eprintln!("CI=true: {ignored} pair(s) could not be compared");
            return ExitCode::FAILURE;
        }
    }
    if failures > 0 || errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Run `pairs`, `jobs` at a time, their outcomes in the order of `pairs`. Pairs that share a
/// fake cell (one fake runner compared with several Codex releases) share its folder, so they
/// run one after another.
async fn run_pairs(pairs: &[Pair], ctx: Arc<CellContext>, jobs: usize) -> Vec<PairOutcome> {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, pair) in pairs.iter().enumerate() {
        groups.entry(pair.fake.name()).or_default().push(index);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort_by_key(|group| group[0]);
    let slots = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut running = tokio::task::JoinSet::new();
    for group in groups {
        let group: Vec<(usize, Pair)> = group.into_iter().map(|i| (i, pairs[i].clone())).collect();
        let (slots, ctx) = (slots.clone(), ctx.clone());
        running.spawn(async move {
            let _slot = slots.acquire_owned().await;
            let mut done = Vec::new();
            for (index, pair) in group {
                eprintln!("running {}", pair.name());
                done.push((index, fidelity::run_pair(&pair, &ctx).await));
            }
            done
        });
    }
    let mut outcomes: Vec<Option<PairOutcome>> = pairs.iter().map(|_| None).collect();
    while let Some(finished) = running.join_next().await {
        match finished {
            Ok(done) => {
                for (index, outcome) in done {
                    outcomes[index] = Some(outcome);
                }
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a pair's task ended without an outcome: {e}"),
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.expect("every pair ran"))
        .collect()
}

fn ms(duration: Duration) -> String {
    format!("{}", duration.as_millis())
}

/// The report: one row per pair, then the fidelity failures in full.
pub fn table(outcomes: &[PairOutcome]) -> String {
    let mut out = String::new();
    let header = [
        "pair",
        "fake",
        "real",
        "sequence",
        "real ms",
        "codex ms",
        "harness ms",
        "overhead",
    ];
    let rows: Vec<[String; 8]> = outcomes
        .iter()
        .map(|o| {
            let sequence = if !o.compared() {
                "not compared".to_string()
            } else if let Some(d) = &o.divergence {
                format!("DIVERGES at {}", d.index)
            } else if o.sent_difference.is_some() {
                "DRIVER SENT OTHERWISE".to_string()
            } else if !o.id_changes.is_empty() {
                "IDS DIFFER".to_string()
            } else if let Some(t) = &o.truncated {
                format!(
                    "same to the {} cut ({} of {})",
                    t.side, t.index, t.other_len
                )
            } else {
                format!("same ({} messages)", o.fake.sequence.len())
            };
            let (codex, harness, overhead) = match (o.real.codex_span, o.real.harness_time()) {
                (Some(span), Some(harness)) => (
                    ms(span),
                    ms(harness),
                    format!(
                        "{:.1}%",
                        100.0 * harness.as_secs_f64() / o.real.wall.as_secs_f64().max(1e-9)
                    ),
                ),
                _ => ("-".into(), "-".into(), "-".into()),
            };
            [
                o.pair.clone(),
                short(&o.fake.verdict),
                short(&o.real.verdict),
                sequence,
                ms(o.real.wall),
                codex,
                harness,
                overhead,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(header[i].len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
            + "\n"
    };
    out.push_str(&line(header.to_vec()));
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    for o in outcomes {
        if let Some(failure) = o.failure() {
            out.push_str(&format!("\nFIDELITY FAILURE {}: {failure}\n", o.pair));
        } else if let Some(truncated) = &o.truncated {
            out.push_str(&format!("\n{}: {}\n", o.pair, truncated.describe()));
        }
        for side in [&o.fake, &o.real] {
            if !side.graded {
                out.push_str(&format!("\n{}: {}\n", side.cell, side.verdict));
            }
        }
    }
    out
}

fn short(verdict: &str) -> String {
    if verdict.starts_with("ignored") {
        "ignored".into()
    } else if verdict.starts_with("error") {
        "error".into()
    } else {
        verdict.into()
    }
}
