//! Input reaching the fake while a turn runs, and input ending as a turn starts: the turn's
//! course follows what the client sent and in what order, never which of the fake's threads
//! (the reader or the turn's player) ran first. Each race is run several times: on the old
//! player each ended both ways within a few runs.

use crate::common;

use common::cases::{decide, spawn, start_thread};
use common::{Client, Lab, Line, WAIT};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Runs of each race; a few seconds in all.
const RUNS: usize = 10;

fn turn_start(id: u64, thread: &str, text: &str) -> Value {
    json!({"id": id, "method": "turn/start",
        "params": {"threadId": thread, "input": [{"type": "text", "text": text}]}})
}

/// The fake on `builtin:NAME`, initialized, with a thread (`permissions`): the client and the
/// thread's id; the lab lives as long as the client needs its workspace.
fn session(name: &str, permissions: &str) -> (Client, String, Lab) {
    let (mut client, _, lab) = spawn(name, Lab::new(), &[]);
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, permissions);
    (client, thread, lab)
}

/// What the fake sent from `turn/started` to the next `turn/completed`, approvals declined,
/// without ids or times: the methods of notifications and server requests, each completed
/// item's type, an agent message's text. Answers are left out: the copy's comes whenever the
/// reader handled it.
fn turn_course(client: &mut Client) -> Vec<String> {
    let mut answer = decide("decline");
    let mut course = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = match client.next_line(left) {
            Some(Line::Json(message)) => message,
            Some(Line::Raw(raw)) => panic!("a line that is not JSON: {raw}"),
            None => panic!("no turn/completed; seen: {:#?}", client.seen),
        };
        let Some(method) = message["method"].as_str() else {
            continue;
        };
        if message.get("id").is_some() {
            if let Some(reply) = answer(&message) {
                client.send(&reply);
            }
        }
        if course.is_empty() && method != "turn/started" {
            continue;
        }
        course.push(match method {
            "item/completed" => {
                let item = &message["params"]["item"];
                format!("{method} {} {}", item["type"], item["text"])
            }
            _ => method.to_string(),
        });
        if method == "turn/completed" {
            return course;
        }
    }
}

/// The course of a turn on `builtin:NAME` whose `turn/start` goes twice (what `harness
/// mutate`'s `duplicate-requests` sends): the copy in the same write, or `delay` later.
fn course_with_a_copy(name: &str, delay: Option<Duration>) -> Vec<String> {
    let (mut client, thread, _lab) = session(name, "fullread");
    let (start, copy) = (
        turn_start(100, &thread, "Do the task."),
        turn_start(101, &thread, "Do the task."),
    );
    match delay {
        None => client.send_in_one_write(&[start, copy]),
        Some(delay) => {
            client.send(&start);
            std::thread::sleep(delay);
            client.send(&copy);
        }
    }
    turn_course(&mut client)
}

/// Where the copy's input shows in `course` (its userMessage item), if it does.
fn steered_at(course: &[String]) -> Option<usize> {
    let users = course
        .iter()
        .enumerate()
        .filter(|(_, m)| m.starts_with("item/completed \"userMessage\""));
    users.map(|(at, _)| at).nth(1)
}

/// A `turn/start` copied into the running turn is input steered into it; as Codex defers input
/// that reaches a turn it started with input until the model's first request is answered, the
/// model's first response plays the scenario's script (here: the escalation the client
/// declines) whether the copy arrived in the same write or later, and the copy's input reaches
/// the model with its next request.
#[test]
fn a_turn_start_copied_into_a_running_turn_takes_the_same_course_every_time() {
    let mut courses = Vec::new();
    for delay in [None, Some(Duration::from_millis(50))] {
        for _ in 0..RUNS {
            let course = course_with_a_copy("command-escalation-refused", delay);
            courses.push((delay, course));
        }
    }
    let (_, first) = &courses[0];
    let asked = first
        .iter()
        .position(|m| m == "item/commandExecution/requestApproval");
    assert!(
        matches!((asked, steered_at(first)), (Some(a), Some(s)) if a < s),
        "the script's escalation first, then the copy's input: {first:#?}"
    );
    for (delay, course) in &courses {
        assert_eq!(course, first, "copy after {delay:?}");
    }
}

/// A copy in the same write as the `turn/start` of a turn that waits for nothing is read with
/// it, and the fake starts a turn's player once its reader has handled what it read: the copy
/// is steered into the turn every time, never left for a turn of its own.
#[test]
fn a_turn_start_copied_in_the_same_write_is_steered_into_a_turn_that_waits_for_nothing() {
    let courses: Vec<Vec<String>> = (0..RUNS)
        .map(|_| course_with_a_copy("healthy", None))
        .collect();
    assert!(steered_at(&courses[0]).is_some(), "{:#?}", courses[0]);
    for course in &courses {
        assert_eq!(course, &courses[0]);
    }
}

/// A turn the fake accepted just before its input ended plays to its end: the wait at the end
/// of input counts it from its `turn/start`, not from when its thread got to run.
#[test]
fn a_turn_started_as_input_ends_is_played_before_the_fake_exits() {
    for run in 0..RUNS {
        let (mut client, thread, _lab) = session("healthy", "fullread");
        client.send(&turn_start(100, &thread, "Reply with MARKER-1."));
        client.close_stdin();
        let mut methods = Vec::new();
        while let Some(line) = client.next_line(WAIT) {
            if let Line::Json(message) = line {
                methods.extend(message["method"].as_str().map(str::to_string));
            }
        }
        assert!(
            methods.iter().any(|m| m == "turn/completed"),
            "run {run}: the fake exited before the turn completed: {methods:?}"
        );
        assert!(client.wait_exit(WAIT).is_some_and(|s| s.success()));
    }
}
