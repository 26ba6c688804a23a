use super::*;

fn records(lines: &[&str]) -> Vec<Record> {
    transcript::read(lines.join("\n").as_bytes()).unwrap()
}

fn row<'a>(table: &'a Table, method: &str) -> &'a Tally {
    table
        .0
        .get(method)
        .unwrap_or_else(|| panic!("{method} in {:?}", table.0))
}

/// Each answer is classified on its own launch: a result, a refusing result (an approval's
/// decision, an elicitation's action), an error, none by the transcript's end; an answer to an
/// id the app-server never asked counts for nothing.
#[test]
fn answers_are_told_apart_by_launch_and_id() {
    let transcript = records(&[
        r#"{"direction":"in","launch":1,"time":1,"message":{"id":0,"method":"initialize","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":2,"message":{"id":0,"result":{}}}"#,
        r#"{"direction":"in","launch":1,"time":3,"message":{"method":"initialized"}}"#,
        r#"{"direction":"in","launch":1,"time":3,"message":{"id":1,"method":"thread/start","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":4,"message":{"id":1,"error":{"code":-32603,"message":"no"}}}"#,
        r#"{"direction":"in","launch":1,"time":4,"message":{"id":2,"method":"turn/start","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":5,"message":{"method":"turn/started","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":5,"message":{"method":"turn/started","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":6,"message":{"id":7,"method":"item/commandExecution/requestApproval","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":6,"message":{"id":8,"method":"item/commandExecution/requestApproval","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":6,"message":{"id":9,"method":"item/commandExecution/requestApproval","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":6,"message":{"id":10,"method":"item/commandExecution/requestApproval","params":{}}}"#,
        r#"{"direction":"out","launch":1,"time":6,"message":{"id":"e","method":"mcpServer/elicitation/request","params":{}}}"#,
        r#"{"direction":"in","launch":1,"time":7,"message":{"id":7,"result":{"decision":"accept"}}}"#,
        r#"{"direction":"in","launch":1,"time":7,"message":{"id":8,"result":{"decision":"decline"}}}"#,
        r#"{"direction":"in","launch":1,"time":7,"message":{"id":9,"error":{"code":-32601,"message":"unknown"}}}"#,
        r#"{"direction":"in","launch":1,"time":7,"message":{"id":"e","result":{"action":"cancel"}}}"#,
        r#"{"direction":"in","launch":1,"time":7,"message":{"id":99,"result":{}}}"#,
        // A second launch reuses the ids: its answers are its own.
        r#"{"direction":"out","launch":2,"time":8,"message":{"id":7,"method":"item/fileChange/requestApproval","params":{}}}"#,
        r#"{"direction":"in","launch":1,"time":9,"message":{"id":7,"result":{"decision":"accept"}}}"#,
        r#"{"direction":"out","launch":2,"time":9,"note":"oversized line","bytes":2000000}"#,
    ]);
    let mut tallies = Tallies::default();
    tallies.add(&transcript);
    tallies.add(&transcript[..3]);
    let approval = row(
        &tallies.tables[Kind::ServerRequest as usize],
        "item/commandExecution/requestApproval",
    );
    assert_eq!(
        approval,
        &Tally {
            count: 4,
            answered: 1,
            refused: 1,
            error: 1,
            never_answered: 1,
            cells: 1
        }
    );
    let elicitation = row(
        &tallies.tables[Kind::ServerRequest as usize],
        "mcpServer/elicitation/request",
    );
    assert_eq!((elicitation.count, elicitation.refused), (1, 1));
    let file_change = row(
        &tallies.tables[Kind::ServerRequest as usize],
        "item/fileChange/requestApproval",
    );
    assert_eq!(
        (
            file_change.count,
            file_change.answered,
            file_change.never_answered
        ),
        (1, 0, 1),
        "launch 1's answer to id 7 is not launch 2's"
    );
    let initialize = row(&tallies.tables[Kind::ClientRequest as usize], "initialize");
    assert_eq!(
        (initialize.count, initialize.answered, initialize.cells),
        (2, 2, 2)
    );
    let thread_start = row(
        &tallies.tables[Kind::ClientRequest as usize],
        "thread/start",
    );
    assert_eq!((thread_start.count, thread_start.error), (1, 1));
    let turn_start = row(&tallies.tables[Kind::ClientRequest as usize], "turn/start");
    assert_eq!(turn_start.never_answered, 1);
    assert_eq!(
        row(&tallies.tables[Kind::Notification as usize], "turn/started").count,
        2
    );
    assert_eq!(
        row(
            &tallies.tables[Kind::ClientNotification as usize],
            "initialized"
        )
        .cells,
        2
    );
    assert_eq!(tallies.recorder_notes, 1);
}

/// A driver's invented methods cannot grow a table past its bound, nor a long name a row.
#[test]
fn a_flood_of_methods_is_bounded() {
    let lines: Vec<String> = (0..MAX_METHODS + 20)
        .map(|i| format!(r#"{{"direction":"in","time":1,"message":{{"method":"m{i}"}}}}"#))
        .chain([format!(
            r#"{{"direction":"in","time":1,"message":{{"method":"{}"}}}}"#,
            "x".repeat(5000)
        )])
        .collect();
    let transcript = records(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    let mut tallies = Tallies::default();
    tallies.add(&transcript);
    let table = &tallies.tables[Kind::ClientNotification as usize].0;
    assert_eq!(table.len(), MAX_METHODS + 1);
    assert_eq!(table[OTHER_METHODS].count, 21);
    let short = Table::default();
    let key = short.key(&"y".repeat(5000));
    assert!(
        key.len() < 300 && key.ends_with("(5000 bytes in all)"),
        "{key}"
    );
}

#[test]
fn a_runner_belongs_to_the_longest_driver_name_it_is_generated_from() {
    let driver: suites::spec::DeclaredDriver =
        toml::from_str("command = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]").unwrap();
    let drivers: BTreeMap<String, suites::spec::DeclaredDriver> = ["my", "my-codex", "other"]
        .into_iter()
        .map(|n| (n.to_string(), driver.clone()))
        .collect();
    for (runner, wanted) in [
        ("my-fake", Some("my")),
        ("my-fake-0-171-0", Some("my")),
        ("my-codex", Some("my")),
        ("my-codex-0-160-0", Some("my")),
        ("my-codex-fake", Some("my-codex")),
        ("my-codex-codex", Some("my-codex")),
        ("my-fakeish", None),
        ("runner-fake", None),
        ("other-codexy", None),
    ] {
        assert_eq!(driver_of(runner, &drivers), wanted, "{runner}");
    }
    assert_eq!(undashed("0-171-0").as_deref(), Some("0.171.0"));
    assert_eq!(undashed("0-172-0-alpha-1"), None);
}
