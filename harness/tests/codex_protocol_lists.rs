//! The fake's protocol lists come from the pinned Codex, checked here at test time against the
//! binary itself: the unknown-method error (which lists every client method, in Codex's order)
//! must read exactly as the real server's, and the notifications a scenario may name must be the
//! ones the pinned Codex's generated `ServerNotification.json` lists.
//!
//! Needs the pinned real Codex: without it the test is reported as ignored with the reason;
//! under `CI=true` it fails instead.

#[allow(dead_code)]
mod common;

use common::{codex_schema, prereq};
use harness::codex::provision;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

const ANSWER_BOUND: Duration = Duration::from_secs(30);

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials = vec![
        prereq::trial(
            "the_unknown_method_error_is_the_pinned_codex_one_needs_real_codex",
            prereq::codex_missing(),
            || {
                the_unknown_method_error_is_the_pinned_codex_one();
                Ok(())
            },
        ),
        prereq::trial(
            "scenario_notification_names_are_the_pinned_codex_ones_needs_real_codex",
            prereq::codex_missing(),
            || {
                scenario_notification_names_are_the_pinned_codex_ones();
                Ok(())
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// Send `initialize` and one request for an unknown method; return the error message.
fn unknown_method_error(
    program: &std::path::Path,
    leading: &[&str],
    home: &std::path::Path,
) -> String {
    let mut child = Command::new(program)
        .args(leading)
        .env("CODEX_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the app-server");
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "lists", "version": "0"}}});
    let unknown = json!({"id": 2, "method": "no/such/method", "params": {}});
    writeln!(stdin, "{initialize}\n{unknown}").unwrap();
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line) {
                if message["id"] == 2 && tx.send(message).is_err() {
                    break;
                }
            }
        }
    });
    let answer = rx.recv_timeout(ANSWER_BOUND).unwrap_or_else(|_| {
        panic!(
            "{} gave no answer within {ANSWER_BOUND:?}",
            program.display()
        )
    });
    drop(stdin);
    if child
        .wait_timeout(Duration::from_secs(5))
        .ok()
        .flatten()
        .is_none()
    {
        let _ = child.kill();
        let _ = child.wait();
    }
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
        .to_string()
}

fn the_unknown_method_error_is_the_pinned_codex_one() {
    let install = provision::resolve(provision::PINNED).expect("the pinned Codex");
    let scratch = tempfile::tempdir().unwrap();
    let real = unknown_method_error(&install.binary, &["app-server"], scratch.path());
    let fake = unknown_method_error(
        std::path::Path::new(env!("CARGO_BIN_EXE_harness")),
        &["fake-app-server", "app-server"],
        scratch.path(),
    );
    assert_eq!(
        fake, real,
        "the fake's client-method list (fake-app-server/src/protocol/client_methods.txt) is not the pinned Codex's; regenerate it from this error"
    );
}

fn scenario_notification_names_are_the_pinned_codex_ones() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("schema");
    codex_schema::generate(&dir);
    let text = std::fs::read_to_string(dir.join("ServerNotification.json")).unwrap();
    let document: Value = serde_json::from_str(&text).unwrap();
    let real: BTreeSet<String> = document["oneOf"]
        .as_array()
        .expect("ServerNotification.json is a oneOf")
        .iter()
        .flat_map(|branch| {
            branch["properties"]["method"]["enum"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    assert!(real.len() > 50, "suspiciously few notifications: {real:?}");
    let fake: BTreeSet<String> = fake_app_server::protocol::server_notifications()
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = real.difference(&fake).collect();
    let extra: Vec<_> = fake.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "fake-app-server/src/protocol/server_notifications.txt differs from the pinned Codex: missing {missing:?}, not in Codex {extra:?}"
    );
}
