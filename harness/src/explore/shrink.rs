//! A diverging session made minimal: greedily, one simplification at a time (the transport
//! plain, the answer accepting, no launch arguments, no capabilities, a step dropped, a
//! parameter dropped, the plain scenario), each kept while the session still diverges the same
//! way (the same [`super::compare::MessageDivergence::class`]); bounded by a number of replays
//! and the explorer's deadline.

use super::session::{AnswerKind, Session, Transport};
use serde_json::Value;
use std::time::Instant;

/// The most replays one shrink makes.
pub const MAX_REPLAYS: usize = 16;

/// The parameters a request needs whatever else it has: its thread, its input.
const KEPT_PARAMS: &[&str] = &["threadId", "input"];

/// The simpler sessions to try next, simplest change first.
pub fn candidates(session: &Session) -> Vec<Session> {
    let mut out = Vec::new();
    let mut with = |change: &dyn Fn(&mut Session)| {
        let mut candidate = session.clone();
        change(&mut candidate);
        if candidate != *session {
            out.push(candidate);
        }
    };
    with(&|s| s.transport = Transport::Plain);
    with(&|s| {
        s.answer = AnswerKind::Accept;
        s.choice = None;
    });
    with(&|s| s.launch_args.clear());
    with(&|s| s.capabilities = Value::Null);
    if let Some(keys) = session
        .capabilities
        .as_object()
        .map(|m| m.keys().cloned().collect::<Vec<_>>())
    {
        for key in keys {
            with(&|s| {
                if let Some(map) = s.capabilities.as_object_mut() {
                    map.remove(&key);
                }
            });
        }
    }
    // Every optional parameter of a step at once (what a request needs to name its thread and
    // its input is kept), before one at a time.
    for index in 0..session.steps.len() {
        with(&|s| {
            if let Some(map) = s.steps[index].params.as_object_mut() {
                map.retain(|key, _| KEPT_PARAMS.contains(&key.as_str()));
            }
        });
    }
    for index in (0..session.steps.len()).rev() {
        with(&|s| {
            s.steps.remove(index);
            let last = s.steps.len().saturating_sub(1);
            match &mut s.transport {
                Transport::CloseStdinEarly { after } | Transport::Signal { after, .. } => {
                    *after = (*after).min(last);
                }
                _ => {}
            }
        });
    }
    for (index, step) in session.steps.iter().enumerate() {
        for key in step.params.as_object().into_iter().flat_map(|m| m.keys()) {
            with(&|s| {
                if let Some(map) = s.steps[index].params.as_object_mut() {
                    map.remove(key);
                }
            });
        }
    }
    with(&|s| s.scenario = "healthy".into());
    out
}

/// Shrink `session` while `diverges_same_way` says a candidate still diverges as it did; the
/// smallest session found and the replays made.
pub fn shrink(
    session: &Session,
    deadline: Instant,
    mut diverges_same_way: impl FnMut(&Session) -> bool,
) -> (Session, usize) {
    let mut current = session.clone();
    let mut replays = 0;
    'outer: loop {
        for candidate in candidates(&current) {
            if replays >= MAX_REPLAYS || Instant::now() >= deadline {
                break 'outer;
            }
            replays += 1;
            if diverges_same_way(&candidate) {
                current = candidate;
                continue 'outer;
            }
        }
        break;
    }
    (current, replays)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::session::Step;
    use serde_json::json;
    use std::time::Duration;

    fn session() -> Session {
        Session {
            scenario: "command-approval".into(),
            launch_args: vec!["--disable".into(), "web_search".into()],
            capabilities: json!({"experimentalApi": true}),
            steps: vec![
                Step {
                    method: "thread/start".into(),
                    params: json!({"cwd": "{cwd}", "ephemeral": true}),
                },
                Step {
                    method: "model/list".into(),
                    params: json!({}),
                },
            ],
            answer: AnswerKind::Decline,
            choice: None,
            transport: Transport::SlowReader { pause_ms: 20 },
        }
    }

    #[test]
    fn a_divergence_that_needs_only_one_field_shrinks_to_it() {
        let deadline = Instant::now() + Duration::from_secs(60);
        // Diverges whenever the first step asks for an ephemeral thread.
        let (shrunk, replays) = shrink(&session(), deadline, |s| {
            s.steps
                .first()
                .is_some_and(|step| step.params.get("ephemeral").is_some())
        });
        assert_eq!(shrunk.transport, Transport::Plain);
        assert_eq!(shrunk.answer, AnswerKind::Accept);
        assert!(shrunk.launch_args.is_empty());
        assert_eq!(shrunk.capabilities, Value::Null);
        assert_eq!(shrunk.steps.len(), 1);
        assert_eq!(shrunk.steps[0].params, json!({"ephemeral": true}));
        assert_eq!(shrunk.scenario, "healthy");
        assert!(replays <= MAX_REPLAYS, "{replays}");
    }

    #[test]
    fn shrinking_stops_at_its_bound() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut calls = 0;
        let (_, replays) = shrink(&session(), deadline, |_| {
            calls += 1;
            false
        });
        assert_eq!(replays, calls);
        assert!(replays <= MAX_REPLAYS);
        let (unchanged, none) = shrink(&session(), Instant::now(), |_| true);
        assert_eq!((unchanged, none), (session(), 0));
    }
}
