//! The streaming reader's validation: each malformed stream is an error naming its line.

use crate::support::*;
use graders::grade::grade_reader;
use graders::reader::{read_all, ReadError, ReaderConfig, StreamError};
use graders::verdict::VerdictKind;
use rstest::rstest;

fn valid() -> Stream {
    Stream::planning_session()
        .driver(codex_refused_item())
        .harness(workspace(&[]))
        .harness(succeeded())
}

fn lines(stream: &Stream) -> Vec<String> {
    stream.jsonl().lines().map(str::to_string).collect()
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn read(text: &str) -> Result<Vec<graders::events::Event>, StreamError> {
    read_all(text.as_bytes(), ReaderConfig::default()).map_err(|e| match e {
        ReadError::Invalid(e) => e,
        ReadError::Io(e) => panic!("in-memory input cannot fail to read: {e}"),
    })
}

fn duplicate_seq() -> String {
    let mut l = lines(&valid());
    l.insert(3, l[2].clone());
    join(&l)
}

fn missing_seq() -> String {
    let mut l = lines(&valid());
    l.remove(2);
    join(&l)
}

fn truncated_last_line() -> String {
    let text = valid().jsonl();
    text[..text.len() - 20].to_string()
}

fn terminal_in_the_middle() -> String {
    Stream::planning_session()
        .harness(succeeded())
        .driver(codex_refused_item())
        .jsonl()
}

fn two_terminals() -> String {
    valid().harness(succeeded()).jsonl()
}

fn other_run_id() -> String {
    let mut l = lines(&valid());
    l[2] = l[2].replace(RUN, "run-other");
    join(&l)
}

fn other_version() -> String {
    let mut l = lines(&valid());
    l[1] = l[1].replacen("\"v\":3", "\"v\":4", 1);
    join(&l)
}

/// The stream as a version-1 writer wrote it: `v` 1 and no timestamps.
fn version_1(stream: &Stream) -> String {
    let l: Vec<String> = lines(stream)
        .iter()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            v["v"] = 1.into();
            v.as_object_mut().unwrap().remove("ts_ms");
            v.to_string()
        })
        .collect();
    join(&l)
}

fn mixed_versions() -> String {
    let mut l: Vec<String> = version_1(&valid()).lines().map(str::to_string).collect();
    l[2] = lines(&valid())[2].clone();
    join(&l)
}

fn missing_timestamp() -> String {
    let mut l = lines(&valid());
    let mut v: serde_json::Value = serde_json::from_str(&l[2]).unwrap();
    v.as_object_mut().unwrap().remove("ts_ms");
    l[2] = v.to_string();
    join(&l)
}

fn empty_line() -> String {
    let mut l = lines(&valid());
    l.insert(2, String::new());
    join(&l)
}

fn not_json() -> String {
    let mut l = lines(&valid());
    l[3] = "this is not json".into();
    join(&l)
}

fn unknown_kind() -> String {
    let mut l = lines(&valid());
    l[3] = l[3].replacen(
        "\"kind\":\"turn.submitted\"",
        "\"kind\":\"turn.teleported\"",
        1,
    );
    join(&l)
}

fn not_utf8() -> Vec<u8> {
    let mut bytes = valid().jsonl().into_bytes();
    let at = bytes.iter().position(|b| *b == b'\n').unwrap() + 20;
    bytes[at] = 0xff;
    bytes
}

fn ten_megabyte_line() -> String {
    let mut l = lines(&valid());
    l.insert(
        4,
        format!("{{\"v\":1,\"seq\":4,\"pad\":\"{}\"}}", "x".repeat(10 << 20)),
    );
    join(&l)
}

#[rstest]
#[case::duplicate_seq(duplicate_seq(), StreamError::Seq { line: 4, expected: 3, found: 2 })]
#[case::missing_seq(missing_seq(), StreamError::Seq { line: 3, expected: 2, found: 3 })]
#[case::truncated_last_line(truncated_last_line(), StreamError::Truncated { line: 7 })]
#[case::terminal_in_the_middle(terminal_in_the_middle(), StreamError::AfterTerminal { line: 6, kind: graders::events::Kind::ItemCompleted, terminal_line: 5 })]
#[case::two_terminals(two_terminals(), StreamError::AfterTerminal { line: 8, kind: graders::events::Kind::RunEnded, terminal_line: 7 })]
#[case::missing_terminal(Stream::planning_session().jsonl(), StreamError::MissingTerminal { lines: 4 })]
#[case::empty_stream(String::new(), StreamError::Empty)]
#[case::other_run_id(other_run_id(), StreamError::RunMismatch { line: 3, expected: RUN.into(), found: "run-other".into() })]
#[case::other_version(other_version(), StreamError::Version { line: 2, found: 4 })]
#[case::mixed_versions(mixed_versions(), StreamError::MixedVersions { line: 3, first: 1, found: 3 })]
#[case::missing_timestamp(missing_timestamp(), StreamError::MissingTimestamp { line: 3 })]
#[case::empty_line(empty_line(), StreamError::EmptyLine { line: 3 })]
#[case::ten_megabyte_line(ten_megabyte_line(), StreamError::LineTooLong { line: 5, limit: graders::reader::DEFAULT_MAX_LINE_BYTES })]
fn invalid_streams_name_the_line(#[case] text: String, #[case] expected: StreamError) {
    assert_eq!(read(&text).unwrap_err(), expected);
    let verdict = grade_reader(
        "codex-planning-read-only",
        "plan-write-refused",
        text.as_bytes(),
    )
    .unwrap();
    assert_eq!(verdict.verdict, VerdictKind::Incomplete);
    assert!(
        verdict.reason.contains(&expected.to_string()),
        "{}",
        verdict.reason
    );
}

#[rstest]
#[case::not_json(not_json(), 4)]
#[case::unknown_kind(unknown_kind(), 4)]
fn malformed_lines_name_the_line(#[case] text: String, #[case] line: u64) {
    match read(&text).unwrap_err() {
        StreamError::Malformed { line: l, .. } => assert_eq!(l, line),
        other => panic!("expected a malformed line, got {other}"),
    }
}

#[test]
fn invalid_utf8_names_the_line() {
    let bytes = not_utf8();
    let err = read_all(&bytes[..], ReaderConfig::default()).unwrap_err();
    assert!(
        matches!(err, ReadError::Invalid(StreamError::NotUtf8 { line: 2 })),
        "{err}"
    );
}

#[test]
fn a_valid_stream_reads_back_equal() {
    let stream = valid();
    assert_eq!(read(&stream.jsonl()).unwrap(), stream.events);
    // A complete last line without its newline is not truncated.
    let text = stream.jsonl();
    assert_eq!(read(text.trim_end()).unwrap(), stream.events);
}

#[test]
fn version_1_streams_still_read_and_grade_the_same() {
    let stream = valid();
    let old = version_1(&stream);
    let events = read(&old).unwrap();
    assert!(events.iter().all(|e| e.v == 1 && e.ts_ms.is_none()));
    let (suite, case) = ("codex-planning-read-only", "plan-write-refused");
    let now = grade_reader(suite, case, stream.jsonl().as_bytes()).unwrap();
    let then = grade_reader(suite, case, old.as_bytes()).unwrap();
    assert_eq!(then, now);
    assert_eq!(
        graders::grade::grade(suite, case, &events).unwrap(),
        now,
        "in memory, version-1 events grade the same"
    );
}

#[test]
fn version_2_streams_still_read_and_grade_the_same() {
    let stream = valid();
    let v3 = format!("\"v\":{}", graders::events::SCHEMA_VERSION);
    let old = stream.jsonl().replace(&v3, "\"v\":2");
    let events = read(&old).unwrap();
    assert!(events.iter().all(|e| e.v == 2 && e.ts_ms.is_some()));
    let (suite, case) = ("codex-planning-read-only", "plan-write-refused");
    let now = grade_reader(suite, case, stream.jsonl().as_bytes()).unwrap();
    assert_eq!(grade_reader(suite, case, old.as_bytes()).unwrap(), now);
}

#[test]
fn line_limits_are_checked() {
    use graders::reader::{ConfigError, MAX_MAX_LINE_BYTES};
    assert_eq!(
        ReaderConfig::with_max_line_bytes(u64::MAX),
        Err(ConfigError::LineLimitTooLarge { got: u64::MAX })
    );
    assert_eq!(
        ReaderConfig::with_max_line_bytes(0),
        Err(ConfigError::LineLimitZero)
    );
    assert!(ReaderConfig::with_max_line_bytes(MAX_MAX_LINE_BYTES as u64).is_ok());
    // A configuration built by hand with an absurd limit neither panics nor unbounds memory.
    let text = valid().jsonl();
    let absurd = ReaderConfig {
        max_line_bytes: usize::MAX,
    };
    assert!(read_all(text.as_bytes(), absurd).is_ok());
    let zero = ReaderConfig { max_line_bytes: 0 };
    assert!(matches!(
        read_all(text.as_bytes(), zero),
        Err(ReadError::Invalid(StreamError::LineTooLong {
            limit: 1,
            ..
        }))
    ));
}

#[test]
fn the_line_limit_is_configurable() {
    let text = valid().jsonl();
    let longest = text.lines().map(str::len).max().unwrap();
    let exact = ReaderConfig {
        max_line_bytes: longest,
    };
    assert!(read_all(text.as_bytes(), exact).is_ok());
    let short = ReaderConfig {
        max_line_bytes: longest - 1,
    };
    assert!(matches!(
        read_all(text.as_bytes(), short),
        Err(ReadError::Invalid(StreamError::LineTooLong { .. }))
    ));
}

#[test]
fn a_payload_that_does_not_match_its_kind_is_incomplete_when_needed() {
    let mut l = lines(&valid());
    // The command item's payload loses its `item`: the plan grader needs it.
    l[4] = format!("{{\"v\":2,\"seq\":4,\"ts_ms\":1,\"run\":\"{RUN}\",\"source\":\"driver\",\"kind\":\"item.completed\",\"payload\":{{}}}}");
    let text = join(&l);
    let verdict = grade_reader(
        "codex-planning-read-only",
        "plan-write-refused",
        text.as_bytes(),
    )
    .unwrap();
    assert_eq!(verdict.verdict, VerdictKind::Incomplete);
    assert!(verdict.reason.contains("line 5"), "{}", verdict.reason);
}
