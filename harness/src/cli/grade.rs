//! `harness grade --suite SUITE --case CASE [--format text|json] EVENTS.jsonl`: grade one run's
//! event stream while streaming it. Exit 0 for `pass`, 1 for any other verdict (an invalid or
//! truncated stream is an `incomplete` verdict), 2 when the input cannot be read or the
//! suite/case is unknown.

use driver::provenance::{Key, MarkedLines};
use graders::grade::{grade_reader_with, GradeError};
use graders::reader::ReaderConfig;
use graders::verdict::{Verdict, VerdictKind};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Suite name, e.g. `codex-planning-read-only`.
    #[arg(long)]
    pub suite: String,
    /// Case name within the suite, e.g. `plan-write-refused`.
    #[arg(long)]
    pub case: String,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Longest accepted line in bytes (1 to 8 MiB); a longer line makes the stream
    /// `incomplete`.
    #[arg(long, default_value_t = ReaderConfig::default(), value_parser = parse_line_limit)]
    pub max_line_bytes: ReaderConfig,
    /// The run's event stream (JSONL); `-` reads standard input.
    #[arg(value_parser = super::absolute_path_or_stdin)]
    pub events: PathBuf,
}

/// Exit code for unreadable input or an unknown suite/case.
const UNREADABLE: u8 = 2;
/// Large reads: grading is I/O- and parse-bound on big logs.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// `--max-line-bytes`: a number in the range the reader accepts, checked before any input is
/// read (clap reports the error and exits 2).
fn parse_line_limit(text: &str) -> Result<ReaderConfig, String> {
    let bytes: u64 = text
        .parse()
        .map_err(|e| format!("`{text}` is not a byte count: {e}"))?;
    ReaderConfig::with_max_line_bytes(bytes).map_err(|e| e.to_string())
}

pub fn main(args: Args) -> ExitCode {
    let config = args.max_line_bytes;
    // The harness's own streams carry its mark (driver::provenance): without this user's key
    // nothing verifies, and no stream can pass.
    let key = match codex::provision::cache_root().and_then(|cache| Key::load(&cache)) {
        Ok(key) => key,
        Err(e) => {
            eprintln!("harness grade: {e:#}");
            return ExitCode::from(UNREADABLE);
        }
    };
    let max_line = config.effective_max_line_bytes();
    let marks;
    let graded = if args.events.as_os_str() == "-" {
        let stdin = std::io::stdin().lock();
        let mut lines = MarkedLines::new(stdin, key, max_line);
        let graded = grade_reader_with(&args.suite, &args.case, BufReader::new(&mut lines), config);
        marks = (lines.unmarked, lines.unmarked_first);
        graded
    } else {
        // Opened as evidence is: a regular file (a pipe is read through `-`), bounded.
        match graders::evidence_file::open(&args.events, graders::evidence_file::MAX_STREAMED_BYTES)
        {
            Ok(Some(file)) => {
                let mut lines = MarkedLines::new(
                    BufReader::with_capacity(READ_BUFFER_BYTES, file),
                    key,
                    max_line,
                );
                let graded =
                    grade_reader_with(&args.suite, &args.case, BufReader::new(&mut lines), config);
                marks = (lines.unmarked, lines.unmarked_first);
                graded
            }
            Ok(None) => {
                eprintln!(
                    "harness grade: cannot open {}: there is no such file",
                    args.events.display()
                );
                return ExitCode::from(UNREADABLE);
            }
            Err(e) => {
                eprintln!("harness grade: {e} (a pipe is read with `-`)");
                return ExitCode::from(UNREADABLE);
            }
        }
    };
    let verdict = match graded {
        Ok(verdict) => verdict,
        Err(e @ GradeError::Io(_)) => {
            eprintln!("harness grade: {}: {e}", args.events.display());
            return ExitCode::from(UNREADABLE);
        }
        Err(e) => {
            eprintln!("harness grade: {e}");
            return ExitCode::from(UNREADABLE);
        }
    };
    let verdict = match marks {
        (unmarked, Some(first)) if verdict.is_pass() && unmarked > 0 => {
            unverified(verdict, unmarked, first)
        }
        _ => verdict,
    };
    let printed = match args.format {
        Format::Text => print_text(&verdict),
        Format::Json => serde_json::to_string_pretty(&verdict)
            .map_err(std::io::Error::other)
            .and_then(|json| writeln!(std::io::stdout().lock(), "{json}")),
    };
    if let Err(e) = printed {
        eprintln!("harness grade: writing the verdict: {e}");
        return ExitCode::from(UNREADABLE);
    }
    if verdict.is_pass() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A pass resting on lines the harness did not write: no pass (a stream written by a driver, by
/// hand, edited, or recorded by another user's harness holds no evidence of this harness's own).
fn unverified(verdict: Verdict, unmarked: u64, first: u64) -> Verdict {
    Verdict::new(
        VerdictKind::Incomplete,
        format!(
            "{unmarked} line(s) of the stream (the first: line {first}) carry no valid mark of this harness, so the stream is not evidence the harness recorded itself and cannot pass; graded as it is, it would have passed: {}",
            verdict.reason
        ),
        verdict.evidence,
    )
}

fn print_text(verdict: &Verdict) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "verdict: {}", verdict.verdict)?;
    writeln!(out, "reason: {}", verdict.reason)?;
    if verdict.evidence.is_empty() {
        return Ok(());
    }
    writeln!(out, "evidence:")?;
    for e in &verdict.evidence {
        match (e.seq, e.line) {
            (Some(seq), _) => writeln!(out, "  seq {seq}: {}", e.excerpt)?,
            (None, Some(line)) => writeln!(out, "  line {line}: {}", e.excerpt)?,
            (None, None) => writeln!(out, "  {}", e.excerpt)?,
        }
    }
    Ok(())
}
