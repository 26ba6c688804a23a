//! The unknown-method error of an app-server: Codex answers a method it does not know with
//! `Invalid request: unknown variant `X`, expected one of `a`, `b`, …`, which lists every client
//! method it accepts (more than its generated schema: legacy v1 methods too).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

const ANSWER_BOUND: Duration = Duration::from_secs(30);
pub const PROBE_METHOD: &str = "no/such/method";

/// Start `program ARGS…` with `CODEX_HOME=home`, initialize, send an unknown method and return
/// the error message (bounded; the child is always reaped).
pub fn unknown_method_error(program: &Path, args: &[&str], home: &Path) -> Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .env("CODEX_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let mut stdin = child.stdin.take().context("child stdin")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let initialize = json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "drift", "version": "0"}}});
    let unknown = json!({"id": 2, "method": PROBE_METHOD, "params": {}});
    let sent = writeln!(stdin, "{initialize}\n{unknown}").and_then(|()| stdin.flush());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if message["id"] == 2 {
                    let _ = tx.send(message);
                    break;
                }
            }
        }
    });
    let answer = rx.recv_timeout(ANSWER_BOUND);
    drop(stdin);
    if child.wait_timeout(Duration::from_secs(5))?.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    sent.with_context(|| format!("writing to {}", program.display()))?;
    let answer = answer.map_err(|_| {
        anyhow::anyhow!(
            "{} did not answer `{PROBE_METHOD}` within {ANSWER_BOUND:?}",
            program.display()
        )
    })?;
    match answer["error"]["message"].as_str() {
        Some(message) => Ok(message.to_string()),
        None => bail!(
            "{} answered `{PROBE_METHOD}` without an error: {answer}",
            program.display()
        ),
    }
}

/// The method names an unknown-variant error lists, in its order.
pub fn listed_methods(message: &str) -> Result<Vec<String>> {
    let Some((_, list)) = message.split_once("expected one of ") else {
        bail!("not an unknown-variant error: {message}");
    };
    Ok(list
        .split(", ")
        .map(|m| m.trim().trim_matches('`').to_string())
        .filter(|m| !m.is_empty())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_read_in_order() {
        let message =
            "Invalid request: unknown variant `x`, expected one of `initialize`, `thread/start`";
        assert_eq!(
            listed_methods(message).unwrap(),
            ["initialize", "thread/start"]
        );
        assert!(listed_methods("something else").is_err());
    }
}
