//! `harness explore`: generated sessions played on the fake and on the pinned real Codex,
//! compared message by message (see `harness::explore`).

use crate::explore::{self, sides::Players, Options};
use matrix::paths;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The seed sessions are generated from (default: the current time, printed): the same
    /// seed generates the same sessions.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop starting sessions (and shrinking) after this many seconds.
    #[arg(long, default_value_t = 100)]
    pub budget: u64,
    /// At most this many generated sessions.
    #[arg(long, default_value_t = 1000)]
    pub sessions: usize,
    /// Where the sessions run and `explore.md` goes (default: `<conformance>/explore`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<std::path::PathBuf>,
    /// Write each shrunk divergence as a regression scenario into this folder (the
    /// repository's corpus is `harness/explore-corpus/`); with `--replay`, write each replayed
    /// scenario there with what the real Codex said this time.
    #[arg(long, value_parser = super::absolute_path)]
    pub corpus: Option<std::path::PathBuf>,
    /// Divergences known and open (`[[open]]` tables of `matches` and `reason`): reported,
    /// not failing (default: the repository's `harness/explore-open.toml`).
    #[arg(long, value_parser = super::absolute_path)]
    pub open: Option<std::path::PathBuf>,
    /// Generate nothing: replay these regression scenarios (files, or folders of them) on
    /// both sides, and report which still diverge.
    #[arg(long, value_parser = super::absolute_path)]
    pub replay: Vec<std::path::PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| paths::conformance_root().join("explore"));
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default()
    });
    eprintln!("harness explore: seed {seed}");
    let fail = |what: String| {
        eprintln!("harness explore: {what}");
        ExitCode::from(2)
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        return fail(format!("creating {}: {e}", out.display()));
    }
    let codex = match codex::provision::ensure(codex::provision::PINNED) {
        Ok(install) => install,
        Err(e) => return fail(format!("the pinned Codex: {e:#}")),
    };
    let harness_binary = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => return fail(format!("the harness binary: {e}")),
    };
    let players = Players {
        harness_binary,
        codex: Some(codex),
    };
    if !args.replay.is_empty() {
        return replay(&players, &args.replay, &out, args.corpus.as_deref());
    }
    let open_file = args.open.clone().unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("explore-open.toml")
    });
    let open = match explore::read_open(&open_file) {
        Ok(open) => open,
        Err(e) => return fail(format!("{e:#}")),
    };
    let options = Options {
        open,
        seed,
        budget: Duration::from_secs(args.budget),
        sessions: args.sessions,
        out: out.clone(),
        corpus: args.corpus,
    };
    let report = match explore::explore(&players, &options) {
        Ok(report) => report,
        Err(e) => return fail(format!("{e:#}")),
    };
    let text = explore::render(&report);
    print!("{text}");
    let path = out.join("explore.md");
    if let Err(e) = std::fs::write(&path, &text) {
        return fail(format!("writing {}: {e}", path.display()));
    }
    if let Ok(summary) = std::env::var("GITHUB_STEP_SUMMARY") {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(summary) {
            let _ = file.write_all(text.as_bytes());
        }
    }
    eprintln!("report: {}", path.display());
    if report.failures() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Replay `paths` on both sides; with `record_into`, write each scenario there again with what
/// the real Codex said this time (how a hand-written session joins the corpus).
fn replay(
    players: &Players,
    paths: &[std::path::PathBuf],
    out: &std::path::Path,
    record_into: Option<&std::path::Path>,
) -> ExitCode {
    let mut scenarios = Vec::new();
    for path in paths {
        let read = if path.is_dir() {
            explore::corpus::read_all(path)
        } else {
            explore::corpus::read_one(path).map(|s| vec![(path.display().to_string(), s)])
        };
        match read {
            Ok(found) => scenarios.extend(found),
            Err(e) => {
                eprintln!("harness explore: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    let mut diverging = 0;
    for (index, (name, scenario)) in scenarios.iter().enumerate() {
        let root = out.join("replay").join(format!("{index:04}"));
        let played = explore::diverges(players, &scenario.session, &root);
        if let (Some(dir), Ok((_, real))) = (record_into, &played) {
            let recorded = explore::corpus::Scenario {
                real: real.clone(),
                ..scenario.clone()
            };
            let file = std::path::Path::new(name.as_str())
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| name.clone());
            if let Err(e) = explore::corpus::write(dir, &file, &recorded) {
                eprintln!("harness explore: {e:#}");
                return ExitCode::from(2);
            }
        }
        match played.map(|(divergence, _)| divergence) {
            Ok(None) => println!("- `{name}`: the same"),
            Ok(Some(divergence)) => {
                diverging += 1;
                println!("- `{name}`: {}", divergence.describe());
            }
            Err(e) => {
                diverging += 1;
                println!("- `{name}`: not played: {e:#}");
            }
        }
    }
    println!(
        "{} scenarios replayed, {diverging} diverge",
        scenarios.len()
    );
    if diverging == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
