//! `harness bench graders`: the streaming grader against `jq` on the same generated event log.
//!
//! Generates a valid planning run of at least `--size-mb` MB (command items with realistic
//! outputs, model tool calls, messages, diagnostics, then a refused probe write, workspace
//! evidence and the terminal), then runs, each as a child process, `harness grade` (this
//! executable) and `jq -c 'select(.kind == "item.completed")'`, and reports wall-clock
//! throughput and the peak RSS of each child (from `wait4`'s rusage).

use anyhow::{bail, Context, Result};
use event_log::generate;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod event_log;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Size of the generated event log in MB (10^6 bytes); the issue's target is measured at 200.
    #[arg(long, default_value_t = 200)]
    pub(crate) size_mb: u64,
    /// Runs per tool; the median throughput and the largest peak RSS are reported.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Directory for the generated log (default: a fresh temporary directory, removed after).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Longest a single child may run before it is killed and the benchmark fails.
    #[arg(long, default_value_t = 600)]
    pub(crate) timeout_secs: u64,
}

const SUITE: &str = "codex-planning-read-only";
const CASE: &str = "plan-write-refused";
const JQ_FILTER: &str = r#"select(.kind == "item.completed")"#;
const TARGET_RATIO: f64 = 5.0;
const TARGET_RSS_MB: f64 = 32.0;

/// What the benchmark tells as it measures, before its report.
pub enum Progress {
    /// The event log is written.
    Generated {
        log: PathBuf,
        bytes: u64,
        events: u64,
        took: Duration,
    },
    /// The figures of a debug build are not the ones to quote.
    DebugBuild,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Progress::Generated {
                log,
                bytes,
                events,
                took,
            } => write!(
                f,
                "generated {} ({:.1} MB, {events} events) in {:.1}s",
                log.display(),
                *bytes as f64 / 1e6,
                took.as_secs_f64()
            ),
            Progress::DebugBuild => write!(
                f,
                "WARNING: this is a debug build; measure with `cargo run --release -p harness -- bench graders`"
            ),
        }
    }
}

/// One tool's figures: median throughput (MB/s) and largest peak RSS (MB).
struct Figures {
    throughput: f64,
    rss_mb: f64,
}

/// The figures of both tools on the same log.
pub struct Report {
    runs: usize,
    mb: f64,
    log: PathBuf,
    grade: Figures,
    /// `None`: no `jq` on PATH.
    jq: Option<Figures>,
    grade_cmdline: String,
    /// The `"verdict"` line of the grader's report on the log.
    verdict: String,
}

impl Report {
    /// Whether both targets are met (throughput against `jq`, which must be there, and peak
    /// RSS).
    pub fn met(&self) -> bool {
        let ratio_met = self
            .jq
            .as_ref()
            .is_some_and(|jq| self.grade.throughput / jq.throughput >= TARGET_RATIO);
        ratio_met && self.grade.rss_mb < TARGET_RSS_MB
    }
}

struct Measurement {
    wall: Duration,
    max_rss_kib: u64,
    status: i32,
    stdout: String,
}

/// Generate the log, then measure `harness grade` and `jq` on it; `progress` hears of each
/// step.
pub fn run(args: &Args, progress: &mut dyn FnMut(Progress)) -> Result<Report> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let tmp;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("bench-graders-")
                .tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let log = dir.join("events.jsonl");
    let started = Instant::now();
    let (bytes, events) = generate(&log, args.size_mb * 1_000_000)?;
    progress(Progress::Generated {
        log: log.clone(),
        bytes,
        events,
        took: started.elapsed(),
    });
    let exe = std::env::current_exe().context("locating the harness executable")?;
    if cfg!(debug_assertions) {
        progress(Progress::DebugBuild);
    }
    let timeout = Duration::from_secs(args.timeout_secs);
    let mb = bytes as f64 / 1e6;
    let grade_runs = measure_grade(&exe, &log, args.runs, timeout)?;
    let jq = measure_jq(&log, args.runs, timeout)?;
    Ok(Report {
        runs: args.runs,
        mb,
        grade: summarize(&grade_runs, mb),
        jq: jq.map(|runs| summarize(&runs, mb)),
        grade_cmdline: format!(
            "{} grade --suite {SUITE} --case {CASE} --format json {}",
            exe.display(),
            log.display()
        ),
        verdict: grade_runs[0]
            .stdout
            .lines()
            .find(|l| l.contains("\"verdict\""))
            .unwrap_or("")
            .trim()
            .to_string(),
        log,
    })
}

/// `harness grade` (this executable) on the log, `runs` times; it must pass the log.
fn measure_grade(
    exe: &Path,
    log: &Path,
    runs: usize,
    timeout: Duration,
) -> Result<Vec<Measurement>> {
    let mut grade_cmd = Command::new(exe);
    grade_cmd
        .args([
            "grade", "--suite", SUITE, "--case", CASE, "--format", "json",
        ])
        .arg(log);
    let grade_runs = measure_runs(&mut grade_cmd, runs, timeout)?;
    if grade_runs[0].status != 0 {
        bail!(
            "`harness grade` did not pass the generated log (exit {}): {}",
            grade_runs[0].status,
            grade_runs[0].stdout
        );
    }
    Ok(grade_runs)
}

/// `jq` on the log, `runs` times; `None` when there is no `jq` on PATH.
fn measure_jq(log: &Path, runs: usize, timeout: Duration) -> Result<Option<Vec<Measurement>>> {
    let Some(jq) = sandbox::system::which("jq") else {
        return Ok(None);
    };
    let mut jq_cmd = Command::new(jq);
    jq_cmd.args(["-c", JQ_FILTER]).arg(log);
    let runs = measure_runs(&mut jq_cmd, runs, timeout)?;
    if runs[0].status != 0 {
        bail!("jq exited {}", runs[0].status);
    }
    Ok(Some(runs))
}

/// The report as the command line prints it.
pub fn render(r: &Report) -> String {
    let mb = r.mb;
    let g = &r.grade;
    let mut text = String::from("\n");
    text += &format!(
        "{:<14} {:>10} {:>12} {:>14}\n",
        "tool", "median s", "MB/s", "peak RSS MB"
    );
    text += &format!(
        "{:<14} {:>10.2} {:>12.1} {:>14.1}\n",
        "harness grade",
        mb / g.throughput,
        g.throughput,
        g.rss_mb
    );
    match &r.jq {
        Some(j) => {
            text += &format!(
                "{:<14} {:>10.2} {:>12.1} {:>14.1}\n",
                "jq",
                mb / j.throughput,
                j.throughput,
                j.rss_mb
            );
            let ratio = g.throughput / j.throughput;
            text += &format!(
                "\nthroughput ratio harness/jq: {ratio:.1}x (target >= {TARGET_RATIO}x): {}\n",
                ok(ratio >= TARGET_RATIO)
            );
        }
        None => text += "\njq: NOT FOUND on PATH, so there is no side-by-side number; install jq (e.g. `apt-get install jq`) and rerun\n",
    }
    text += &format!(
        "harness grade peak RSS {:.1} MB (target < {TARGET_RSS_MB} MB): {}\n",
        g.rss_mb,
        ok(g.rss_mb < TARGET_RSS_MB)
    );
    text += &format!("runs per tool: {}; file: {mb:.1} MB\n", r.runs);
    text += &format!("grade command: {}\n", r.grade_cmdline);
    text += &format!("jq command:    jq -c '{JQ_FILTER}' {}\n", r.log.display());
    text += &format!("verdict: {}\n", r.verdict);
    text
}

fn ok(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// Median throughput (MB/s) and the largest peak RSS (MB) over the runs.
fn summarize(runs: &[Measurement], mb: f64) -> Figures {
    let mut throughputs: Vec<f64> = runs.iter().map(|m| mb / m.wall.as_secs_f64()).collect();
    throughputs.sort_by(f64::total_cmp);
    let median = throughputs[throughputs.len() / 2];
    let rss_mb = runs.iter().map(|m| m.max_rss_kib).max().unwrap_or(0) as f64 * 1024.0 / 1e6;
    Figures {
        throughput: median,
        rss_mb,
    }
}

fn measure_runs(cmd: &mut Command, runs: usize, timeout: Duration) -> Result<Vec<Measurement>> {
    (0..runs).map(|_| measure(cmd, timeout)).collect()
}

/// Run one child to completion and read its own peak RSS from `wait4`. (`getrusage` of
/// `RUSAGE_CHILDREN` would mix all children; std's `Child::wait` does not expose rusage.)
fn measure(cmd: &mut Command, timeout: Duration) -> Result<Measurement> {
    use std::os::unix::process::CommandExt;
    // A `pre_exec` hook makes std fork instead of vfork/posix_spawn. With vfork the child
    // shares this process's address space until exec, and Linux folds that address space's
    // peak RSS into the child's `ru_maxrss`; a forked child only inherits our anonymous pages.
    // SAFETY: the hook does nothing, so it is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| Ok(()));
    }
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    // Drain stdout on a thread so a chatty child (jq prints every selected line) never blocks.
    let mut stdout = child.stdout.take().context("child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut keep = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if keep.len() < 1 << 16 => keep.extend_from_slice(&buf[..n]),
                Ok(_) => {}
            }
        }
        String::from_utf8_lossy(&keep).into_owned()
    });
    let (status, rusage) = loop {
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own unreaped child; both out-pointers are valid for writes.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut rusage) };
        if reaped == pid {
            break (status, rusage);
        }
        if reaped < 0 {
            bail!("wait4({pid}): {}", std::io::Error::last_os_error());
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            bail!(
                "{cmd:?} ran longer than {}s and was killed",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    let stdout = reader.join().unwrap_or_default();
    let status = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok(Measurement {
        wall,
        // Linux reports ru_maxrss in KiB.
        max_rss_kib: u64::try_from(rusage.ru_maxrss).unwrap_or(0),
        status,
        stdout,
    })
}
