//! Validating the model's result-reporting tool calls (`paperclip_finish`, `paperclip_block`):
//! arguments must satisfy the tool's JSON Schema; the first valid result wins; an identical
//! retry is acknowledged again without a second result; a conflicting one is rejected; a call
//! bound to another thread or turn is a protocol violation that closes the session.

use crate::launch::tools;
use graders::events::{Outcome, ResultProposed};
use serde_json::Value;

/// How the driver answers one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolDecision {
    /// A new result: answer success and record it.
    Accepted(ResultProposed),
    /// The same call as the accepted one: answer success again, record nothing.
    Repeated,
    /// Answer `success: false` with this text.
    Rejected(String),
    /// The call names another thread or turn: close the session.
    WrongBinding(String),
}

#[derive(Debug, Default)]
pub(crate) struct ToolResults {
    accepted: Option<(String, Value)>,
}

impl ToolResults {
    /// Forget the accepted result (the driver answered a blocking question and the run goes on).
    pub(crate) fn reset(&mut self) {
        self.accepted = None;
    }

    pub(crate) fn accepted(&self) -> Option<&(String, Value)> {
        self.accepted.as_ref()
    }

    /// Decide on an `item/tool/call` with these params, for the thread and turn in progress.
    pub(crate) fn decide(
        &mut self,
        params: &Value,
        thread_id: &str,
        turn_id: Option<&str>,
    ) -> ToolDecision {
        let call_thread = params["threadId"].as_str().unwrap_or_default();
        let call_turn = params["turnId"].as_str().unwrap_or_default();
        if call_thread != thread_id {
            return ToolDecision::WrongBinding(format!(
                "tool call bound to thread `{call_thread}`, but the session's thread is `{thread_id}`"
            ));
        }
        if let Some(turn_id) = turn_id {
            if call_turn != turn_id {
                return ToolDecision::WrongBinding(format!(
                    "tool call bound to turn `{call_turn}`, but the turn in progress is `{turn_id}`"
                ));
            }
        }
        let tool = params["tool"].as_str().unwrap_or_default().to_string();
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        let Some(schema) = tools::schema_of(&tool) else {
            return ToolDecision::Rejected(format!("unknown tool `{tool}`"));
        };
        if let Err(problems) = validate(&schema, &arguments) {
            return ToolDecision::Rejected(format!("invalid arguments for `{tool}`: {problems}"));
        }
        match &self.accepted {
            Some((t, a)) if *t == tool && *a == arguments => ToolDecision::Repeated,
            Some((t, _)) => ToolDecision::Rejected(format!(
                "a result was already reported with `{t}`; this `{tool}` call conflicts with it"
            )),
            None => {
                let result = to_result(&tool, &arguments);
                self.accepted = Some((tool, arguments));
                ToolDecision::Accepted(result)
            }
        }
    }
}

/// The tools' schemas use only keywords that mean the same in every draft, so they are compiled
/// as Draft 7: the driver compiles a meta-schema once per run to check the tool's own schema,
/// and in a debug build Draft 7's takes ~8 ms where 2020-12's (the default without `$schema`)
/// takes ~42 ms, a fifth of a fake cell's wall time (measured with `harness bench matrix`).
fn validate(schema: &Value, instance: &Value) -> Result<(), String> {
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .build(schema)
        .map_err(|e| format!("the tool's own schema is invalid: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let at = e.instance_path.to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn to_result(tool: &str, args: &Value) -> ResultProposed {
    let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    if tool == tools::BLOCK {
        ResultProposed {
            outcome: Outcome::Blocked,
            summary: text("summary")
                .or_else(|| text("action"))
                .unwrap_or_default(),
            owner: text("owner"),
            action: text("action"),
        }
    } else {
        let blocked = text("status").as_deref() == Some("blocked");
        ResultProposed {
            outcome: if blocked {
                Outcome::Blocked
            } else {
                Outcome::Done
            },
            summary: text("summary").unwrap_or_default(),
            owner: None,
            action: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn draft_7_and_2020_12_agree_on_the_tools_schemas() {
        let instances = [
            json!({"status": "done", "summary": "ok"}),
            json!({"status": "done", "summary": "ok", "files_changed": ["a.txt"]}),
            json!({"status": "finished", "summary": "ok"}),
            json!({"summary": "ok"}),
            json!({"status": "done", "summary": 3}),
            json!({"status": "blocked", "summary": "no", "owner": "me", "action": "look"}),
            json!({"question": "which?", "owner": "me", "action": "answer"}),
            json!({"status": "done", "summary": "ok", "extra": true}),
            json!(null),
        ];
        for tool in [tools::FINISH, tools::BLOCK] {
            let schema = tools::schema_of(tool).unwrap();
            assert!(jsonschema::draft7::meta::is_valid(&schema), "{tool}");
            assert!(jsonschema::draft202012::meta::is_valid(&schema), "{tool}");
            let latest = jsonschema::validator_for(&schema).unwrap();
            for instance in &instances {
                assert_eq!(
                    validate(&schema, instance).is_ok(),
                    latest.is_valid(instance),
                    "{tool}: {instance}"
                );
            }
        }
    }

    fn call(tool: &str, args: Value) -> Value {
        json!({"threadId": "t", "turnId": "u", "callId": "c", "tool": tool, "arguments": args})
    }

    #[test]
    fn first_valid_result_wins_identical_retry_is_idempotent_conflict_rejected() {
        let mut results = ToolResults::default();
        let done = call(
            "paperclip_finish",
            json!({"status": "done", "summary": "ok"}),
        );
        let ToolDecision::Accepted(r) = results.decide(&done, "t", Some("u")) else {
            panic!()
        };
        assert_eq!(r.outcome, Outcome::Done);
        assert_eq!(
            results.decide(&done, "t", Some("u")),
            ToolDecision::Repeated
        );
        let other = call(
            "paperclip_finish",
            json!({"status": "done", "summary": "different"}),
        );
        assert!(matches!(
            results.decide(&other, "t", Some("u")),
            ToolDecision::Rejected(_)
        ));
        let block = call(
            "paperclip_block",
            json!({"owner": "user", "action": "answer"}),
        );
        assert!(matches!(
            results.decide(&block, "t", Some("u")),
            ToolDecision::Rejected(_)
        ));
    }

    #[test]
    fn invalid_arguments_are_rejected_without_taking_the_slot() {
        let mut results = ToolResults::default();
        let bad = call(
            "paperclip_finish",
            json!({"status": "maybe", "summary": "x"}),
        );
        let ToolDecision::Rejected(why) = results.decide(&bad, "t", Some("u")) else {
            panic!()
        };
        assert!(why.contains("/status"), "{why}");
        let extra = call(
            "paperclip_block",
            json!({"owner": "u", "action": "a", "x": 1}),
        );
        assert!(matches!(
            results.decide(&extra, "t", Some("u")),
            ToolDecision::Rejected(_)
        ));
        assert!(results.accepted().is_none());
        let ok = call(
            "paperclip_block",
            json!({"owner": "user", "action": "answer", "summary": "s"}),
        );
        let ToolDecision::Accepted(r) = results.decide(&ok, "t", Some("u")) else {
            panic!()
        };
        assert_eq!(
            (r.outcome, r.owner.as_deref()),
            (Outcome::Blocked, Some("user"))
        );
    }

    #[test]
    fn wrong_thread_or_turn_closes_the_session() {
        let mut results = ToolResults::default();
        let done = call(
            "paperclip_finish",
            json!({"status": "done", "summary": "ok"}),
        );
        assert!(matches!(
            results.decide(&done, "other", Some("u")),
            ToolDecision::WrongBinding(_)
        ));
        assert!(matches!(
            results.decide(&done, "t", Some("v")),
            ToolDecision::WrongBinding(_)
        ));
    }
}
