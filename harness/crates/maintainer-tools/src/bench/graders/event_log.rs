//! The event log `harness bench graders` grades: a valid planning run, the same on every run.

use anyhow::{Context, Result};
use graders::events::*;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::{CASE, SUITE};

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

/// Write a valid planning run of at least `min_bytes` bytes whose verdict is `pass`; its size
/// in bytes and its number of events.
pub(super) fn generate(path: &Path, min_bytes: u64) -> Result<(u64, u64)> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = Writer {
        out: BufWriter::with_capacity(1 << 20, file),
        seq: 0,
        bytes: 0,
        key: matrix::stages::events::evidence_key()?,
    };
    opening(&mut w)?;
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut n = 0u64;
    while w.bytes < min_bytes {
        n += 1;
        step(&mut w, &mut rng, n)?;
    }
    closing(&mut w)?;
    w.out.flush()?;
    Ok((w.bytes, w.seq))
}

/// The run's start: the launch, the session asked for and started, read-only.
fn opening(w: &mut Writer) -> Result<()> {
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
    Ok(())
}

/// The `n`th event of the run's middle, drawn from `rng`: mostly command items with their
/// output, then model tool calls, messages and diagnostics.
fn step(w: &mut Writer, rng: &mut Xorshift, n: u64) -> Result<()> {
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
            let output = output_text(rng, size);
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
                output_text(rng, size)
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
                    text: output_text(rng, size / 4),
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
    Ok(())
}

/// The run's end: the refused probe write, the workspace evidence, the terminal.
fn closing(w: &mut Writer) -> Result<()> {
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
    Ok(())
}
