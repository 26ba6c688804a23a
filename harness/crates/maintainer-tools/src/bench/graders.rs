//! `harness bench graders`: the streaming grader against `jq` on the same generated event log.
//!
//! Generates a valid planning run of at least `--size-mb` MB (command items with realistic
//! outputs, model tool calls, messages, diagnostics, then a refused probe write, workspace
//! evidence and the terminal), then runs, each as a child process, `harness grade` (this
//! executable) and `jq -c 'select(.kind == "item.completed")'`, and reports wall-clock
//! throughput and the peak RSS of each child (from `wait4`'s rusage).

use anyhow::{bail, Context, Result};
use graders::events::*;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

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

pub fn main(args: Args) -> ExitCode {
    match run(&args) {
        Ok(met) if met => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("harness bench graders: {e:#}");
            ExitCode::from(2)
        }
    }
}

struct Measurement {
    wall: Duration,
    max_rss_kib: u64,
    status: i32,
    stdout: String,
}

fn run(args: &Args) -> Result<bool> {
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
    let mb = bytes as f64 / 1e6;
    println!(
        "generated {} ({mb:.1} MB, {events} events) in {:.1}s",
        log.display(),
        started.elapsed().as_secs_f64()
    );
    let exe = std::env::current_exe().context("locating the harness executable")?;
    if cfg!(debug_assertions) {
        println!("WARNING: this is a debug build; measure with `cargo run --release -p harness -- bench graders`");
    }
    let timeout = Duration::from_secs(args.timeout_secs);

    let mut grade_cmd = Command::new(&exe);
    grade_cmd
        .args([
            "grade", "--suite", SUITE, "--case", CASE, "--format", "json",
        ])
        .arg(&log);
    let grade_runs = measure_runs(&mut grade_cmd, args.runs, timeout)?;
    let verdict = &grade_runs[0].stdout;
    if grade_runs[0].status != 0 {
        bail!(
            "`harness grade` did not pass the generated log (exit {}): {verdict}",
            grade_runs[0].status
        );
    }

    let jq_runs = match sandbox::system::which("jq") {
        Some(jq) => {
            let mut jq_cmd = Command::new(jq);
            jq_cmd.args(["-c", JQ_FILTER]).arg(&log);
            let runs = measure_runs(&mut jq_cmd, args.runs, timeout)?;
            if runs[0].status != 0 {
                bail!("jq exited {}", runs[0].status);
            }
            Some(runs)
        }
        None => None,
    };

    let grade_cmdline = format!(
        "{} grade --suite {SUITE} --case {CASE} --format json {}",
        exe.display(),
        log.display()
    );
    let (g_tp, g_rss) = summarize(&grade_runs, mb);
    println!();
    println!(
        "{:<14} {:>10} {:>12} {:>14}",
        "tool", "median s", "MB/s", "peak RSS MB"
    );
    println!(
        "{:<14} {:>10.2} {:>12.1} {:>14.1}",
        "harness grade",
        mb / g_tp,
        g_tp,
        g_rss
    );
    let mut met = g_rss < TARGET_RSS_MB;
    match &jq_runs {
        Some(runs) => {
            let (j_tp, j_rss) = summarize(runs, mb);
            println!(
                "{:<14} {:>10.2} {:>12.1} {:>14.1}",
                "jq",
                mb / j_tp,
                j_tp,
                j_rss
            );
            let ratio = g_tp / j_tp;
            println!();
            println!(
                "throughput ratio harness/jq: {ratio:.1}x (target >= {TARGET_RATIO}x): {}",
                ok(ratio >= TARGET_RATIO)
            );
            met &= ratio >= TARGET_RATIO;
        }
        None => {
            println!();
            println!("jq: NOT FOUND on PATH, so there is no side-by-side number; install jq (e.g. `apt-get install jq`) and rerun");
            met = false;
        }
    }
    println!(
        "harness grade peak RSS {g_rss:.1} MB (target < {TARGET_RSS_MB} MB): {}",
        ok(g_rss < TARGET_RSS_MB)
    );
    println!("runs per tool: {}; file: {mb:.1} MB", args.runs);
    println!("grade command: {grade_cmdline}");
    println!("jq command:    jq -c '{JQ_FILTER}' {}", log.display());
    println!(
        "verdict: {}",
        verdict
            .lines()
            .find(|l| l.contains("\"verdict\""))
            .unwrap_or("")
            .trim()
    );
    Ok(met)
}

fn ok(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// Median throughput (MB/s) and the largest peak RSS (MB) over the runs.
fn summarize(runs: &[Measurement], mb: f64) -> (f64, f64) {
    let mut throughputs: Vec<f64> = runs.iter().map(|m| mb / m.wall.as_secs_f64()).collect();
    throughputs.sort_by(f64::total_cmp);
    let median = throughputs[throughputs.len() / 2];
    let rss = runs.iter().map(|m| m.max_rss_kib).max().unwrap_or(0) as f64 * 1024.0 / 1e6;
    (median, rss)
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

/// A deterministic pseudo-random sequence (xorshift): the log must be the same on every run,
/// and this is all the randomness needed to vary event sizes.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SOURCE_LINES: &[&str] = &[
    "fn main() {\n    let config = Config::load(\"app.toml\").expect(\"config\");\n",
    "    for (i, item) in items.iter().enumerate() { println!(\"{i}: {item:?}\"); }\n",
    "// TODO: handle \"quoted\" values and \\escaped\\ paths\n",
    "error[E0308]: mismatched types\n  --> src/lib.rs:42:9\n",
    "test result: ok. 128 passed; 0 failed; 0 ignored\n",
    "drwxr-xr-x 2 user user 4096 Jan  1 00:00 src\n-rw-r--r-- 1 user user 1234 Jan  1 00:00 Cargo.toml\n",
    "{\"name\":\"pkg\",\"version\":\"1.2.3\",\"dependencies\":{\"serde\":\"1\"}}\n",
    "\tat com.example.Service.handle(Service.java:118)\n",
];

fn output_text(rng: &mut Xorshift, target: usize) -> String {
    let mut out = String::with_capacity(target + 128);
    while out.len() < target {
        out.push_str(SOURCE_LINES[rng.below(SOURCE_LINES.len() as u64) as usize]);
    }
    out
}

struct Writer {
    out: BufWriter<std::fs::File>,
    seq: u64,
    bytes: u64,
    /// The harness's mark (`driver::provenance`): the log is graded as the harness's own.
    key: std::sync::Arc<driver::provenance::Key>,
}

impl Writer {
    fn emit(&mut self, source: Source, body: Body) -> Result<()> {
        let event = Event::new(self.seq, "bench-run", source, body);
        let line = self.key.mark(&serde_json::to_string(&event)?).into_bytes();
        self.out.write_all(&line)?;
        self.out.write_all(b"\n")?;
        self.bytes += line.len() as u64 + 1;
        self.seq += 1;
        Ok(())
    }
}

fn command_item(id: String, command: &str, exit: i64, output: String) -> Body {
    Body::ItemCompleted(ItemEvent {
        turn_id: Some("turn-1".into()),
        item: Item::CommandExecution(CommandExecution {
            id,
            command: command.into(),
            cwd: Some("/workspace".into()),
            status: if exit == 0 { "completed" } else { "failed" }.into(),
            exit_code: Some(exit),
            stdout: None,
            stderr: None,
            aggregated_output: Some(output),
            sandbox: Some("runner-read-only".into()),
            ran_in_sandbox: Some(true),
        }),
    })
}

/// Write a valid planning run of at least `min_bytes` bytes whose verdict is `pass`.
fn generate(path: &Path, min_bytes: u64) -> Result<(u64, u64)> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = Writer {
        out: BufWriter::with_capacity(1 << 20, file),
        seq: 0,
        bytes: 0,
        key: matrix::stages::events::evidence_key()?,
    };
    let permissions = Some("runner-read-only".to_string());
    w.emit(
        Source::Driver,
        Body::RunStarted(RunStarted {
            cell: CellId::new(SUITE, "runner-fake", "local", CASE),
            driver: "reference".into(),
            launch: LaunchSummary {
                mode: Mode::Planning,
                target: Target::Local,
                network_enabled: true,
                policy: PolicyGeneration::Current,
                argv: vec![
                    "-c".into(),
                    r#"default_permissions="runner-read-only""#.into(),
                ],
                thread_permissions: permissions.clone(),
                turn_permissions: permissions.clone(),
                identity: "bench".into(),
            },
            protocol: None,
        }),
    )?;
    w.emit(
        Source::Driver,
        Body::SessionOpenRequested(SessionOpenRequested {
            permissions: permissions.clone(),
            cwd: "/workspace".into(),
            experimental_api: true,
        }),
    )?;
    w.emit(
        Source::Driver,
        Body::SessionStarted(SessionStarted {
            thread_id: "thread-bench".into(),
            sandbox: SandboxFacts::default(),
            approval_policy: Some("never".into()),
            approvals_reviewer: Some("user".into()),
        }),
    )?;
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut n = 0u64;
    while w.bytes < min_bytes {
        n += 1;
        let size = 512 + rng.below(6 * 1024) as usize;
        match rng.below(10) {
            0..=5 => {
                let id = format!("call_{n}");
                w.emit(
                    Source::Driver,
                    Body::ItemStarted(ItemEvent {
                        turn_id: Some("turn-1".into()),
                        item: Item::Other {
                            id: id.clone(),
                            item_type: "commandExecution".into(),
                        },
                    }),
                )?;
                let exit = if rng.below(8) == 0 { 1 } else { 0 };
                let output = output_text(&mut rng, size);
                w.emit(
                    Source::Driver,
                    command_item(id, "/bin/bash -lc 'cargo test'", exit, output),
                )?;
            }
            6 | 7 => {
                let call_id = format!("call_m{n}");
                w.emit(
                    Source::Model,
                    Body::ModelToolCall(ModelToolCall {
                        call_id: call_id.clone(),
                        name: "exec_command".into(),
                        arguments: r#"{"cmd":"rg -n TODO src"}"#.into(),
                        sandbox_permissions: None,
                        justification: None,
                    }),
                )?;
                let output = format!(
                    "Chunk ID: {n:x}\nWall time: 0.0100 seconds\nProcess exited with code 0\nOriginal token count: 99\nOutput:\n{}",
                    output_text(&mut rng, size)
                );
                w.emit(
                    Source::Model,
                    Body::ModelToolOutput(ModelToolOutput { call_id, output }),
                )?;
            }
            8 => w.emit(
                Source::Driver,
                Body::ItemCompleted(ItemEvent {
                    turn_id: Some("turn-1".into()),
                    item: Item::AgentMessage {
                        id: format!("msg_{n}"),
                        text: output_text(&mut rng, size / 4),
                    },
                }),
            )?,
            _ => w.emit(
                Source::Harness,
                Body::Diagnostic(Diagnostic {
                    level: Level::Info,
                    message: format!("progress {n}"),
                }),
            )?,
        }
    }
    w.emit(
        Source::Driver,
        command_item(
            "call_probe".into(),
            "/bin/bash -lc 'printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED'",
            0,
            "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n"
                .into(),
        ),
    )?;
    w.emit(
        Source::Harness,
        Body::WorkspaceEvidence(WorkspaceEvidence {
            pattern: "plan-write-probe-*".into(),
            probes: Vec::new(),
        }),
    )?;
    w.emit(
        Source::Harness,
        Body::RunEnded(RunEnded {
            ending: Ending::Succeeded,
            retry_offered: false,
            error_code: None,
            reason: None,
        }),
    )?;
    w.out.flush()?;
    Ok((w.bytes, w.seq))
}
