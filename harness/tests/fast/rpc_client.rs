//! The JSON-RPC client against tiny scripted children (python3 emitting lines): ids, buffering,
//! server requests with colliding ids, timeouts, oversized and malformed lines, stderr evidence,
//! and killing the child on drop.

use driver::rpc::{Incoming, Limits, RpcClient, TransportError};
use sandbox::launcher::{LocalLauncher, ProcessSpec};
use serde_json::json;
use std::time::{Duration, Instant};

/// A python3 child running `script` (stdlib only).
fn spawn(script: &str, dir: &tempfile::TempDir, limits: Limits) -> RpcClient {
    let spec = ProcessSpec {
        program: "python3".into(),
        args: vec!["-u".into(), "-c".into(), script.into()],
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        cwd: dir.path().to_path_buf(),
    };
    RpcClient::spawn(
        &LocalLauncher,
        &spec,
        &dir.path().join("stderr.log"),
        limits,
    )
    .unwrap()
}

const SECOND: Duration = Duration::from_secs(1);
const FIVE: Duration = Duration::from_secs(5);

/// Answers each request by echoing, preceded by a notification and a server request with id 1.
const ECHO: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "method" in msg and "id" in msg:
        print(json.dumps({"method": "note/before", "params": {"for": msg["id"]}}))
        print(json.dumps({"id": 1, "method": "item/tool/call", "params": {"n": msg["id"]}}))
        print(json.dumps({"id": msg["id"], "result": {"echo": msg["params"]}}))
    elif "result" in msg:
        print(json.dumps({"method": "got/answer", "params": msg}))
"#;

#[tokio::test]
async fn responses_match_ids_and_everything_else_is_kept_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = spawn(ECHO, &dir, Limits::default());
    let result = client
        .request("a", json!({"x": 1}), FIVE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result, json!({"echo": {"x": 1}}));
    // The notification and the colliding server request (id 1, like our own first id) were kept.
    let first = client.next(SECOND).await.unwrap();
    assert_eq!(first.method(), Some("note/before"));
    let Incoming::Request { id, method, .. } = client.next(SECOND).await.unwrap() else {
        panic!("expected a server request")
    };
    assert_eq!((id.clone(), method.as_str()), (json!(1), "item/tool/call"));
    client.respond(&id, json!({"ok": true})).await.unwrap();
    let Incoming::Notification { method, params } = client.next(FIVE).await.unwrap() else {
        panic!()
    };
    assert_eq!(method, "got/answer");
    assert_eq!(params, json!({"id": 1, "result": {"ok": true}}));
    let second = client
        .request("b", json!(null), FIVE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second, json!({"echo": null}));
    let status = client
        .shutdown(FIVE)
        .await
        .expect("exits after stdin closes");
    assert!(status.success());
}

#[tokio::test]
async fn every_wait_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = spawn("import time\ntime.sleep(30)", &dir, Limits::default());
    let started = Instant::now();
    let err = client
        .request("x", json!({}), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("`x`"), "{err}");
    let err = client.next(Duration::from_millis(200)).await.unwrap_err();
    assert!(err.is_timeout());
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn oversized_line_closes_the_transport_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_line_bytes: 1024,
        ..Limits::default()
    };
    let script = r#"
import json, sys, time
print(json.dumps({"method": "ok", "params": {}}))
print(json.dumps({"method": "big", "params": {"pad": "x" * 5000}}))
time.sleep(30)
"#;
    let mut client = spawn(script, &dir, limits);
    assert_eq!(client.next(FIVE).await.unwrap().method(), Some("ok"));
    let err = client.next(FIVE).await.unwrap_err();
    assert_eq!(err, TransportError::Oversized { limit: 1024 });
    // Closed for good: the same error again, and sending fails too.
    assert_eq!(client.next(SECOND).await.unwrap_err(), err);
    assert!(client.notify("x", None).await.is_err());
}

#[tokio::test]
async fn malformed_line_closes_the_transport_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = "print('this is not json')\nimport time\ntime.sleep(30)";
    let mut client = spawn(script, &dir, Limits::default());
    let err = client.next(FIVE).await.unwrap_err();
    match &err {
        TransportError::Malformed { excerpt, .. } => assert_eq!(excerpt, "this is not json"),
        other => panic!("expected malformed, got {other}"),
    }
}

#[tokio::test]
async fn a_crash_is_reported_with_exit_status_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import sys\nsys.stderr.write('fatal: boom\\n')\nsys.exit(101)";
    let mut client = spawn(script, &dir, Limits::default());
    let err = client
        .request("initialize", json!({}), FIVE)
        .await
        .unwrap_err();
    let TransportError::Closed(detail) = &err else {
        panic!("{err}")
    };
    assert!(detail.contains("101"), "{detail}");
    assert!(detail.contains("fatal: boom"), "{detail}");
    let stderr = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert_eq!(stderr, "fatal: boom\n");
}

#[tokio::test]
async fn the_buffer_of_kept_messages_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_buffered: 10,
        ..Limits::default()
    };
    let script = r#"
import json, sys, time
for i in range(50):
    print(json.dumps({"method": "flood", "params": {"i": i}}))
time.sleep(30)
"#;
    let mut client = spawn(script, &dir, limits);
    let err = client
        .request("never-answered", json!({}), FIVE)
        .await
        .unwrap_err();
    assert_eq!(err, TransportError::Overflow { limit: 10 });
}

#[tokio::test]
async fn dropping_the_client_kills_the_child_and_its_group() {
    let dir = tempfile::tempdir().unwrap();
    // The child starts a grandchild in its process group and reports the grandchild's pid.
    let script = r#"
import json, subprocess, time
p = subprocess.Popen(["sleep", "60"])
print(json.dumps({"method": "pid", "params": {"pid": p.pid}}))
time.sleep(60)
"#;
    let mut client = spawn(script, &dir, Limits::default());
    let Incoming::Notification { params, .. } = client.next(FIVE).await.unwrap() else {
        panic!()
    };
    let grandchild = params["pid"].as_i64().unwrap() as i32;
    let child = client.pid().unwrap() as i32;
    drop(client);
    let gone = |pid: i32| {
        // A zombie (state Z) counts as gone: it no longer runs.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z')),
        }
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(gone(child) && gone(grandchild)) {
        assert!(
            Instant::now() < deadline,
            "child {child} or grandchild {grandchild} still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
