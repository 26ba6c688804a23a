//! Ask an app-server a few questions over stdio: `initialize`, `initialized`, then each request;
//! the answers by request, within one bound, the child always reaped. What `harness drift` and
//! the persona checks learn from a real Codex (and from the fake playing it).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ANSWERS_BOUND: Duration = Duration::from_secs(30);

/// Start `command` (its program, arguments, environment and folder set by the caller), send
/// `requests` after the handshake and return each one's response message (`result` or `error`),
/// in the order asked.
pub fn ask(mut command: Command, requests: &[(&str, Value)]) -> Result<Vec<Value>> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let mut stdin = child.stdin.take().context("child stdin")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let mut lines = vec![
        json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "harness-drift", "version": "0"}, "capabilities": {"experimentalApi": true}}}),
        json!({"method": "initialized"}),
    ];
    for (index, (method, params)) in requests.iter().enumerate() {
        lines.push(json!({"id": index + 1, "method": method, "params": params}));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let sent = stdin
        .write_all(text.as_bytes())
        .and_then(|()| stdin.flush());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if message.get("method").is_none() && message["id"].is_u64() {
                    let _ = tx.send(message);
                }
            }
        }
    });
    let deadline = Instant::now() + ANSWERS_BOUND;
    let mut answers: Vec<Option<Value>> = vec![None; requests.len()];
    while answers.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(message) = rx.recv_timeout(left) else {
            break;
        };
        let index = message["id"].as_u64().unwrap_or(0) as usize;
        if let Some(slot) = index.checked_sub(1).and_then(|i| answers.get_mut(i)) {
            *slot = Some(message);
        }
    }
    drop(stdin);
    sandbox::system::wait_bounded(&mut child, Duration::from_secs(5))?;
    sent.with_context(|| format!("writing to {program}"))?;
    let missing: Vec<&str> = requests
        .iter()
        .zip(&answers)
        .filter(|(_, answer)| answer.is_none())
        .map(|((method, _), _)| *method)
        .collect();
    if !missing.is_empty() {
        bail!("{program} did not answer {missing:?} within {ANSWERS_BOUND:?}");
    }
    Ok(answers.into_iter().flatten().collect())
}
