use super::*;
use crate::session::{test_launch, Options};
use graders::wire::transcript::MAX_KEPT_LINE_BYTES;
use std::time::Duration;

/// A launch through a mutated recorder whose app-server is `cat`: what the driver's
/// lines became comes back, and the transcript says what was rewritten.
fn through_cat(operator: Operator, sent: &[u8]) -> (Vec<u8>, Vec<Value>, u64) {
    let (echoed, records, applied, _) = through("exec cat", operator, sent, true);
    (echoed, records, applied)
}

/// A launch through a mutated recorder ([`test_launch::through`]).
fn through(
    server: &str,
    operator: Operator,
    sent: &[u8],
    hang_up_first: bool,
) -> (Vec<u8>, Vec<Value>, u64, Duration) {
    let options = Options {
        mutation: Some(operator),
        timing: None,
    };
    test_launch::through(server, options, sent, hang_up_first)
}

#[test]
fn a_mutated_launch_delivers_the_rewrite_and_records_it() {
    let sent = b"{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"method\":\"initialized\"}\n{\"id\":1,\"method\":\"thread/start\",\"params\":{}}\n";
    let (echoed, records, applied) = through_cat(Operator::DropInitialized, sent);
    assert_eq!(
        String::from_utf8(echoed).unwrap(),
        "{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"id\":1,\"method\":\"thread/start\",\"params\":{}}\n"
    );
    assert_eq!(applied, 1);
    let mutation = records
        .iter()
        .position(|r| r["kind"] == "mutation")
        .expect("a mutation record");
    assert_eq!(records[mutation]["operator"], "drop-initialized");
    assert_eq!(
        records[mutation]["original"],
        "{\"method\":\"initialized\"}"
    );
    assert_eq!(records[mutation]["became"], "not forwarded");
    let delivered: Vec<&Value> = records
        .iter()
        .filter(|r| r["direction"] == "in")
        .map(|r| &r["message"])
        .collect();
    assert_eq!(
        delivered.len(),
        2,
        "the transcript holds what the app-server got"
    );
    assert!(
        records[..mutation]
            .iter()
            .any(|r| r["message"]["method"] == "initialize")
            && records[mutation..]
                .iter()
                .any(|r| r["direction"] == "in" && r["message"]["method"] == "thread/start"),
        "in order: {records:?}"
    );
    graders::wire::transcript::read(
        records
            .iter()
            .map(|r| r.to_string() + "\n")
            .collect::<String>()
            .as_bytes(),
    )
    .expect("the reader takes the mutation record");

    let (echoed, _, applied) = through_cat(Operator::ApprovalNever, sent);
    let echoed = String::from_utf8(echoed).unwrap();
    assert!(echoed.contains("\"approvalPolicy\":\"never\""), "{echoed}");
    assert_eq!(applied, 1);
    let (echoed, _, applied) =
        through_cat(Operator::WidenSandbox, b"{\"method\":\"initialized\"}\n");
    assert_eq!(
        echoed, b"{\"method\":\"initialized\"}\n",
        "nothing to rewrite"
    );
    assert_eq!(applied, 0);
}

fn pieces(chunks: &[&[u8]]) -> Vec<(bool, Vec<u8>)> {
    let mut lines = Lines::default();
    let mut got = Vec::new();
    for chunk in chunks {
        lines.feed(chunk, &mut |piece| match piece {
            Piece::Line(b) => got.push((true, b.to_vec())),
            Piece::Through(b) => got.push((false, b.to_vec())),
        });
    }
    lines.finish(&mut |piece| match piece {
        Piece::Line(b) | Piece::Through(b) => got.push((false, b.to_vec())),
    });
    got
}

#[test]
fn lines_are_cut_across_chunks_and_the_rest_passes_through() {
    let got = pieces(&[b"{\"a\":1}\n{\"b\"", b":2}\n{\"c\""]);
    assert_eq!(
        got,
        vec![
            (true, b"{\"a\":1}\n".to_vec()),
            (true, b"{\"b\":2}\n".to_vec()),
            (false, b"{\"c\"".to_vec()),
        ]
    );
    let long = vec![b'x'; MAX_KEPT_LINE_BYTES + 10];
    let got = pieces(&[&long[..100], &long[100..], b"yy\n{}\n"]);
    let through: usize = got.iter().filter(|p| !p.0).map(|p| p.1.len()).sum();
    assert_eq!(through, long.len() + 3, "an over-long line passes whole");
    assert_eq!(got.last().unwrap(), &(true, b"{}\n".to_vec()));
}

#[test]
fn close_after_turn_start_ends_the_app_servers_part_with_the_answer_whatever_follows() {
    let answer = r#"{"id":7,"result":{"turn":{"id":"t1"}}}"#;
    let rest =
        r#"{"method":"turn/started","params":{}}\n{"method":"turn/completed","params":{}}\n"#;
    // The turn written with the answer (one chunk: it can only be cut inside the chunk), and
    // after it: the driver and the transcript see the same either way.
    let together = format!("read -r line; printf '%s\\n{rest}' '{answer}'; exec sleep 30");
    let later = format!(
        "read -r line; printf '%s\\n' '{answer}'; sleep 0.1; printf '{rest}'; exec sleep 30"
    );
    let sent = br#"{"id":7,"method":"turn/start","params":{"threadId":"t"}}
"#;
    for server in [&together, &later, &together] {
        let (echoed, records, applied, took) =
            through(server, Operator::CloseAfterTurnStart, sent, false);
        assert_eq!(String::from_utf8(echoed).unwrap(), format!("{answer}\n"));
        assert_eq!(applied, 1);
        assert!(
            took < Duration::from_secs(10),
            "the app-server was stopped at the cut, not waited out ({took:?})"
        );
        let out: Vec<&Value> = records
            .iter()
            .filter(|r| r["direction"] == "out" && r.get("message").is_some())
            .map(|r| &r["message"])
            .collect();
        assert_eq!(out.len(), 1, "only the answer is a message: {records:?}");
        let at = |kind: &str| records.iter().position(|r| r["kind"] == kind);
        let mutation = at("mutation").expect("a mutation record");
        assert_eq!(records[mutation]["operator"], "close-after-turn-start");
        assert!(at("stdin-closed").is_some_and(|closed| closed > mutation));
        let exit = &records[at("exit").expect("an exit record")];
        assert!(
            exit["killed_by_harness"]
                .as_str()
                .is_some_and(|why| why.contains("close-after-turn-start")),
            "{exit}"
        );
        if std::ptr::eq(server, &later) {
            continue;
        }
        // Written with the answer, the turn was read: said in a note, not kept.
        let note = records
            .iter()
            .find_map(|r| r["note"].as_str().filter(|n| n.contains("after its cut")))
            .unwrap_or_else(|| panic!("a note of what came after the cut: {records:?}"));
        assert!(
            note.contains("2 lines") && note.contains("turn/started, turn/completed"),
            "{note}"
        );
    }
}

#[test]
fn duplicate_requests_writes_a_request_and_its_copy_at_once() {
    // An app-server that reads once, as soon as input comes: it gets the original and its copy
    // together, so whatever the copy does there (a `turn/start`'s: steer the turn just started)
    // does not depend on when a second write would have come.
    let server =
        r#"exec python3 -c 'import os; os.write(1, b"%d\n" % os.read(0, 65536).count(b"\n"))'"#;
    let sent = b"{\"id\":1,\"method\":\"turn/start\",\"params\":{\"threadId\":\"t\"}}\n";
    for _ in 0..5 {
        let (echoed, _, applied, _) = through(server, Operator::DuplicateRequests, sent, true);
        assert_eq!(applied, 1);
        assert_eq!(
            String::from_utf8_lossy(&echoed),
            "2\n",
            "lines in its one read"
        );
    }
}
