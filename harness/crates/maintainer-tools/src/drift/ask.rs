//! Ask an app-server a few questions over stdio: `initialize`, `initialized`, then each request;
//! the answers by request, within one bound, the child always reaped. What `harness drift` and
//! the persona checks learn from a real Codex (and from the fake playing it).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const ANSWERS_BOUND: Duration = Duration::from_secs(30);

/// Start `command` with piped stdin and stdout: its program's name, the child, its pipes.
fn spawn(command: &mut Command) -> Result<(String, Child, ChildStdin, ChildStdout)> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let stdin = child.stdin.take().context("child stdin")?;
    let stdout = child.stdout.take().context("child stdout")?;
    Ok((program, child, stdin, stdout))
}

/// Start `command` (its program, arguments, environment and folder set by the caller), send
/// `requests` after the handshake and return each one's response message (`result` or `error`),
/// in the order asked.
pub(crate) fn ask(command: Command, requests: &[(&str, Value)]) -> Result<Vec<Value>> {
    ask_as(command, requests, true)
}

/// One request's response, asked as a client that declared no `experimentalApi`.
pub(crate) fn ask_without_capabilities(
    command: Command,
    method: &str,
    params: Value,
) -> Result<Value> {
    let mut answers = ask_as(command, &[(method, params)], false)?;
    answers.pop().context("no answer")
}

fn ask_as(
    mut command: Command,
    requests: &[(&str, Value)],
    experimental_api: bool,
) -> Result<Vec<Value>> {
    let (program, mut child, mut stdin, stdout) = spawn(&mut command)?;
    let mut lines = vec![
        json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "harness-drift", "version": "0"}, "capabilities": {"experimentalApi": experimental_api}}}),
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

/// One step of a [`converse`]: a request (its params may hold `{thread_id}`, the id of the
/// thread the last answer named), or a wait for a notification.
pub(crate) enum Step {
    Request(&'static str, Value),
    Notification(&'static str),
}

/// What a [`converse`] heard: each request's response, in order, and the method of every
/// notification, in order.
pub(crate) struct Conversation {
    pub(crate) answers: Vec<Value>,
    pub(crate) notifications: Vec<String>,
}

/// Like [`ask`], one step at a time: each request waits for the answer before it, so that
/// a `turn/start` can name the thread a `thread/start` made. `experimental_api`: what the
/// client declares at `initialize`.
pub(crate) fn converse(
    mut command: Command,
    steps: &[Step],
    experimental_api: bool,
) -> Result<Conversation> {
    let (program, mut child, mut stdin, stdout) = spawn(&mut command)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(message);
            }
        }
    });
    let deadline = Instant::now() + ANSWERS_BOUND;
    let heard = std::cell::RefCell::new(Vec::new());
    let next = |wanted: &dyn Fn(&Value) -> bool, what: &str| -> Result<Value> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = rx
                .recv_timeout(left)
                .map_err(|_| anyhow::anyhow!("{program}: no {what} within {ANSWERS_BOUND:?}"))?;
            if let (Some(method), None) = (message["method"].as_str(), message.get("id")) {
                heard.borrow_mut().push(method.to_string());
            }
            if wanted(&message) {
                return Ok(message);
            }
        }
    };
    let mut send = |line: Value| -> Result<()> {
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("writing to {program}"))
    };
    let mut run = || -> Result<Vec<Value>> {
        send(
            json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "harness-drift", "version": "0"}, "capabilities": {"experimentalApi": experimental_api}}}),
        )?;
        next(
            &|m| m["id"] == 0 && m.get("method").is_none(),
            "initialize answer",
        )?;
        send(json!({"method": "initialized"}))?;
        let mut thread_id = String::new();
        let mut answers = Vec::new();
        for (index, step) in steps.iter().enumerate() {
            match step {
                Step::Request(method, params) => {
                    let id = index + 1;
                    let params: Value = serde_json::from_str(
                        &params.to_string().replace("{thread_id}", &thread_id),
                    )?;
                    send(json!({"id": id, "method": method, "params": params}))?;
                    let answer = next(
                        &|m| m["id"] == id && m.get("method").is_none(),
                        &format!("answer to {method}"),
                    )?;
                    if let Some(thread) = answer["result"]["thread"]["id"].as_str() {
                        thread_id = thread.to_string();
                    }
                    answers.push(answer);
                }
                Step::Notification(method) => {
                    next(&|m| m["method"] == *method, method)?;
                }
            }
        }
        Ok(answers)
    };
    let answers = run();
    drop(stdin);
    sandbox::system::wait_bounded(&mut child, Duration::from_secs(5))?;
    Ok(Conversation {
        answers: answers?,
        notifications: heard.into_inner(),
    })
}
