//! The client methods around threads and accounts that the published drivers can call, answered
//! as Codex 0.169 answers them (each measured with the real binary, offline), and the methods the
//! fake does not implement, answered `-32603` with the reason its persona gives.

use crate::common;

use common::{Client, Lab, Line};
use serde_json::{json, Value};

fn error_message(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {answer}"))
        .to_string()
}

/// A client with one thread that ran a turn (`ran`) and one that did not (`idle`).
fn two_threads(lab: &Lab) -> (Client, String, String) {
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    let (ran, _) = client.start_thread(&lab.ws_str());
    client.request(
        "turn/start",
        json!({"threadId": ran, "input": [{"type": "text", "text": "hello"}]}),
    );
    client.notification("turn/completed");
    let (idle, _) = client.start_thread(&lab.ws_str());
    client.notification("thread/started");
    (client, ran, idle)
}

/// The notifications received since `seen[from]`, by method.
fn methods_since(client: &Client, from: usize) -> Vec<String> {
    client.seen[from..]
        .iter()
        .filter_map(|line| match line {
            Line::Json(v) if v.get("id").is_none() => v["method"].as_str().map(str::to_string),
            _ => None,
        })
        .collect()
}

#[test]
fn listing_and_paging_threads() {
    let lab = Lab::new();
    let (mut client, ran, idle) = two_threads(&lab);
    let loaded = client.request("thread/loaded/list", json!({}));
    assert_eq!(
        loaded["result"],
        json!({"data": [ran, idle], "nextCursor": null})
    );
    // Only a thread with a rollout is listed; a loaded one as it stands.
    let listed = client.request("thread/list", json!({}));
    let result = &listed["result"];
    assert_eq!(result["data"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(result["data"][0]["id"], ran.as_str());
    assert_eq!(result["data"][0]["status"], json!({"type": "idle"}));
    assert_eq!(result["data"][0]["canAcceptDirectInput"], Value::Null);
    assert_eq!(result["data"][0]["preview"], "hello");
    assert!(result["readStates"][&ran]["firstUnread"]["turnId"].is_string());
    assert_eq!(result["nextCursor"], Value::Null);
    let other_cwd = client.request("thread/list", json!({"cwd": "/nowhere"}));
    assert_eq!(other_cwd["result"]["data"], json!([]));
    // Attached threads only with a search (Codex 0.169, found by `harness explore`).
    for unsearched in [
        json!({"includeAttachedThreads": true}),
        json!({"includeAttachedThreads": true, "searchTerm": ""}),
    ] {
        let refused = client.request("thread/list", unsearched);
        assert_eq!(
            refused["error"],
            json!({"code": -32600, "message": "includeAttachedThreads requires a non-empty searchTerm"}),
            "{refused}"
        );
    }
    let searched = client.request(
        "thread/list",
        json!({"includeAttachedThreads": true, "searchTerm": "hello"}),
    );
    assert!(searched["result"]["data"].is_array(), "{searched}");

    let turns = client.request("thread/turns/list", json!({"threadId": ran}));
    let turn = &turns["result"]["data"][0];
    assert_eq!(turn["itemsView"], "summary");
    let kinds: Vec<&str> = turn["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    assert_eq!(kinds, ["userMessage", "agentMessage"]);
    assert!(turns["result"]["backwardsCursor"].is_string());
    let items = client.request("thread/items/list", json!({"threadId": ran, "limit": 1}));
    let page = &items["result"];
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["data"][0]["item"]["type"], "userMessage");
    assert_eq!(page["data"][0]["turnId"], turn["id"]);
    assert!(page["nextCursor"].is_string(), "{items}");

    // Before its first turn a thread has no history to page (Codex's two different answers).
    let turns = client.request("thread/turns/list", json!({"threadId": idle}));
    assert_eq!(
        error_message(&turns),
        format!("thread {idle} is not materialized yet; thread/turns/list is unavailable before first user message")
    );
    let items = client.request("thread/items/list", json!({"threadId": idle}));
    assert_eq!(items["error"]["code"], -32601);
    assert_eq!(
        error_message(&items),
        "thread/items/list is not supported yet"
    );
}

#[test]
fn naming_goals_terminals_and_unsubscribing() {
    let lab = Lab::new();
    let (mut client, ran, idle) = two_threads(&lab);
    let before = client.seen.len();
    let named = client.request("thread/name/set", json!({"threadId": idle, "name": "n"}));
    assert_eq!(named["result"], json!({}));
    let updated = client.notification("thread/name/updated");
    assert_eq!(
        updated["params"],
        json!({"threadId": idle, "threadName": "n"})
    );
    assert_eq!(methods_since(&client, before), ["thread/name/updated"]);
    let read = client.request("thread/read", json!({"threadId": idle}));
    assert_eq!(read["result"]["thread"]["name"], "n");
    let missing = "01a22bc7-f8e2-7173-b7a0-56e223784188";
    let named = client.request("thread/name/set", json!({"threadId": missing, "name": "n"}));
    assert_eq!(
        error_message(&named),
        format!("no rollout found for thread id {missing}")
    );

    let goal = client.request("thread/goal/get", json!({"threadId": ran}));
    assert_eq!(goal["result"], json!({"goal": null}));
    let cleared = client.request("thread/goal/clear", json!({"threadId": ran}));
    assert_eq!(cleared["result"], json!({"cleared": false}));
    let goal = client.request("thread/goal/get", json!({"threadId": missing}));
    assert_eq!(error_message(&goal), format!("thread not found: {missing}"));

    let terminals = client.request("thread/backgroundTerminals/list", json!({"threadId": ran}));
    assert_eq!(terminals["result"], json!({"data": [], "nextCursor": null}));
    let terminated = client.request(
        "thread/backgroundTerminals/terminate",
        json!({"threadId": ran, "processId": "1"}),
    );
    assert_eq!(terminated["result"], json!({"terminated": false}));

    let unsubscribed = client.request("thread/unsubscribe", json!({"threadId": idle}));
    assert_eq!(unsubscribed["result"], json!({"status": "unsubscribed"}));
    let unsubscribed = client.request("thread/unsubscribe", json!({"threadId": missing}));
    assert_eq!(unsubscribed["result"], json!({"status": "notLoaded"}));
}

#[test]
fn archiving_unarchiving_deleting_and_forking() {
    let lab = Lab::new();
    let (mut client, ran, idle) = two_threads(&lab);
    let fork = client.request("thread/fork", json!({"threadId": ran}));
    let forked = &fork["result"]["thread"];
    let fork_id = forked["id"].as_str().unwrap().to_string();
    assert_eq!(forked["forkedFromId"], ran.as_str());
    assert_eq!(forked["preview"], "hello");
    assert_eq!(forked["turns"].as_array().unwrap().len(), 1);
    assert!(std::path::Path::new(forked["path"].as_str().unwrap()).is_file());
    let started = client.notification("thread/started");
    assert_eq!(started["params"]["thread"]["id"], fork_id.as_str());
    assert_eq!(started["params"]["thread"]["turns"], json!([]));

    let path = client.request("thread/read", json!({"threadId": ran}))["result"]["thread"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let before = client.seen.len();
    let archived = client.request("thread/archive", json!({"threadId": ran}));
    assert_eq!(archived["result"], json!({}));
    client.notification("thread/archived");
    assert_eq!(
        methods_since(&client, before),
        ["thread/status/changed", "thread/archived"]
    );
    assert!(!std::path::Path::new(&path).exists());
    let listed = client.request("thread/list", json!({"archived": true}));
    assert_eq!(listed["result"]["data"][0]["id"], ran.as_str());
    assert_eq!(
        listed["result"]["data"][0]["status"],
        json!({"type": "notLoaded"})
    );
    let fork = client.request("thread/fork", json!({"threadId": ran}));
    assert_eq!(
        error_message(&fork),
        format!("session {ran} is archived. Run `codex unarchive {ran}` to unarchive it first.")
    );
    let unarchived = client.request("thread/unarchive", json!({"threadId": ran}));
    assert_eq!(
        unarchived["result"]["thread"]["status"],
        json!({"type": "notLoaded"})
    );
    assert_eq!(unarchived["result"]["thread"]["path"], path.as_str());
    assert!(std::path::Path::new(&path).is_file());
    client.notification("thread/unarchived");
    let busy = client.request("thread/unarchive", json!({"threadId": fork_id}));
    assert_eq!(
        error_message(&busy),
        format!("thread {fork_id} already has an active writer")
    );

    let deleted = client.request("thread/delete", json!({"threadId": fork_id}));
    assert_eq!(deleted["result"], json!({}));
    client.notification("thread/deleted");
    let loaded = client.request("thread/loaded/list", json!({}));
    assert_eq!(loaded["result"]["data"], json!([idle]));
    let deleted = client.request("thread/delete", json!({"threadId": fork_id}));
    assert_eq!(
        error_message(&deleted),
        format!("no rollout found for thread id {fork_id}")
    );
}

#[test]
fn hooks_skills_accounts_and_config_writes() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    let hooks = client.request("hooks/list", json!({"cwds": [lab.ws_str()]}));
    assert_eq!(
        hooks["result"],
        json!({"data": [{"cwd": lab.ws_str(), "hooks": [], "warnings": [], "errors": []}]})
    );
    // Recorded answers: skills/changed comes before the answer, account/updated after it.
    let before = client.seen.len();
    let set = client.request("skills/extraRoots/set", json!({"extraRoots": []}));
    assert_eq!(set["result"], json!({}));
    assert_eq!(methods_since(&client, before), ["skills/changed"]);
    let logout = client.request("account/logout", Value::Null);
    assert_eq!(logout["result"], json!({}));
    let updated = client.notification("account/updated");
    assert_eq!(
        updated["params"],
        json!({"authMode": null, "planType": null})
    );
    let limits = client.request("account/rateLimits/read", Value::Null);
    assert_eq!(
        error_message(&limits),
        "codex account authentication required to read rate limits"
    );
    let status = client.request("mcpServerStatus/list", json!({}));
    assert_eq!(status["result"], json!({"data": [], "nextCursor": null}));
    let cancel = client.request("account/login/cancel", json!({"loginId": "nope"}));
    assert_eq!(error_message(&cancel), "invalid login id: nope");
    let oauth = client.request("mcpServer/oauth/login", json!({"name": "nope"}));
    assert_eq!(error_message(&oauth), "No MCP server named 'nope' found.");

    let write = client.request(
        "config/batchWrite",
        json!({"edits": [{"keyPath": "model_reasoning_effort", "value": "low", "mergeStrategy": "replace"}]}),
    );
    // The digest Codex 0.169 answered for this very file (measured).
    assert_eq!(
        write["result"]["version"],
        "sha256:8a72c132bcc47a8953a3d0c0be8effc34ee23be9c521e9e58db368c906103c4b",
        "{write}"
    );
    assert_eq!(write["result"]["status"], "ok");
    let file = lab.home().join("config.toml");
    assert_eq!(write["result"]["filePath"], file.display().to_string());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "model_reasoning_effort = \"low\"\n"
    );
    let read = client.request("config/read", json!({"includeLayers": true}));
    let user = read["result"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"]["type"] == "user")
        .cloned()
        .unwrap();
    assert_eq!(user["version"], write["result"]["version"]);
}

#[test]
fn an_unimplemented_method_names_its_reason() {
    let lab = Lab::new();
    let (mut client, ran, _) = two_threads(&lab);
    let review = client.request(
        "review/start",
        json!({"threadId": ran, "target": {"type": "uncommittedChanges"}}),
    );
    assert_eq!(review["error"]["code"], -32603);
    let message = error_message(&review);
    let reason = fake_app_server::persona::find("0.169.0")
        .unwrap()
        .unimplemented_reason("review/start")
        .unwrap();
    assert_eq!(
        message,
        format!("fake-app-server does not implement `review/start` (personas/0.169.0/unimplemented.toml: {reason})")
    );
}

/// Found by `harness explore` (corpus `thread-archive-session-id`): Codex 0.169 words a
/// malformed id given to `thread/archive` as a session id; the fake said `invalid thread id`.
#[test]
fn thread_archive_words_a_malformed_id_as_a_session_id() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.initialize(false);
    let archived = client.request("thread/archive", json!({"threadId": ""}));
    assert_eq!(
        error_message(&archived),
        "invalid session id: invalid length: expected length 32 for simple format, found 0"
    );
}

/// Found by `harness explore` (corpus `second-launch-installation-id`): Codex 0.169 reports the
/// same `installationId` on every launch in a home; the fake drew a new one each time.
#[test]
fn every_launch_in_a_home_reports_the_same_installation_id() {
    let lab = Lab::new();
    let installation_id = |lab: &Lab| {
        let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
        client.initialize(false);
        let status = client.notification("remoteControl/status/changed");
        status["params"]["installationId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = installation_id(&lab);
    assert!(uuid::Uuid::parse_str(&first).is_ok(), "{first}");
    assert_eq!(installation_id(&lab), first);
    assert_ne!(installation_id(&Lab::new()), first);
}
