//! The answers a release's schema allows to a server request beyond the explorer's own kinds
//! ([`AnswerKind`](super::session::AnswerKind): accept, decline, cancel, …): each decision
//! value of the request's `*Response.json` (`acceptForSession`, `acceptWithExecpolicyAmendment`,
//! `applyNetworkPolicyAmendment`, …) and each grant scope (`session`). Read from the schema, so a
//! new release's new string decision is generated without a code change; a new object decision
//! needs its fields filled ([`object_fields`]), and `every_decision_of_the_release_is_classified`
//! names any that is not.

use serde_json::{json, Value};

/// The schema values the explorer's kinds already answer with (`AnswerKind`'s accept, decline
/// and cancel in each schema's words, a turn-scoped grant).
const ANSWERED_BY_THE_KINDS: &[&str] = &[
    "accept", "decline", "cancel", "approved", "denied", "abort", "turn",
];

/// The fields of `response`'s property `name` that take a choice: the client's `decision`
/// (approvals), `action` (elicitations) or grant `scope` (permissions).
const CHOICE_FIELDS: &[&str] = &["decision", "action", "scope"];

/// Why a release's choices cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("Codex {version}'s answer to `{method}` has no schema in graders/protocol")]
    NoSchema { version: String, method: String },
    #[error("Codex {version}'s `{response}` cannot be read: {why}")]
    Broken {
        version: String,
        response: String,
        why: String,
    },
    #[error(
        "Codex {version}'s `{response}` has the decision `{decision}`, an object whose fields the \
         explorer does not know how to fill (add it to explore::choices::object_fields)"
    )]
    Unclassified {
        version: String,
        response: String,
        decision: String,
    },
}

/// One choice of the schema for one field of a server request's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The answer's field it goes in (`decision`, `scope`).
    pub field: String,
    /// The value (a string decision) or the object decision's key.
    pub name: String,
    /// Whether it is an object decision (`{name: {…}}`).
    pub object: bool,
}

/// The choices of Codex `version`'s answer to `method` that the explorer's kinds do not make.
pub fn beyond_the_kinds(version: &str, method: &str) -> Result<Vec<Choice>, ChoiceError> {
    let no_schema = || ChoiceError::NoSchema {
        version: version.into(),
        method: method.into(),
    };
    let release = graders::protocol::release(version).map_err(|_| no_schema())?;
    let response = release.response_type(method).ok_or_else(no_schema)?;
    let text = graders::protocol::response_schema_text(version, response).ok_or_else(no_schema)?;
    let broken = |why: String| ChoiceError::Broken {
        version: version.into(),
        response: response.into(),
        why,
    };
    let schema: Value = serde_json::from_str(text).map_err(|e| broken(e.to_string()))?;
    let mut choices = Vec::new();
    for field in CHOICE_FIELDS {
        let Some(property) = schema["properties"].get(*field) else {
            continue;
        };
        let values = resolve(&schema, property);
        let branches = match values["oneOf"].as_array() {
            Some(branches) => branches.clone(),
            None => vec![values.clone()],
        };
        for branch in branches {
            let (name, object) = match (branch["enum"].as_array(), branch["required"].as_array()) {
                (Some(values), _) => match values.as_slice() {
                    [Value::String(name)] => (name.clone(), false),
                    _ => {
                        for value in values.iter().filter_map(Value::as_str) {
                            push_new(&mut choices, field, value, false);
                        }
                        continue;
                    }
                },
                (None, Some(required)) if required.len() == 1 => {
                    (required[0].as_str().unwrap_or_default().to_string(), true)
                }
                _ => {
                    return Err(broken(format!(
                        "a `{field}` branch neither a value nor one key"
                    )))
                }
            };
            if ANSWERED_BY_THE_KINDS.contains(&name.as_str()) {
                continue;
            }
            if object && object_fields(&name, &Value::Null).is_none() {
                return Err(ChoiceError::Unclassified {
                    version: version.into(),
                    response: response.into(),
                    decision: name,
                });
            }
            push_new(&mut choices, field, &name, object);
        }
    }
    Ok(choices)
}

fn push_new(choices: &mut Vec<Choice>, field: &str, name: &str, object: bool) {
    if !ANSWERED_BY_THE_KINDS.contains(&name) {
        choices.push(Choice {
            field: field.into(),
            name: name.into(),
            object,
        });
    }
}

/// `property` with its `$ref` (or its `allOf`'s single `$ref`) followed into `schema`'s
/// definitions.
fn resolve<'a>(schema: &'a Value, property: &'a Value) -> &'a Value {
    let reference = property["$ref"]
        .as_str()
        .or_else(|| property["allOf"][0]["$ref"].as_str());
    match reference {
        Some(reference) => &schema["definitions"][reference.rsplit('/').next().unwrap_or_default()],
        None => property,
    }
}

/// The fields of the object decision `name`, filled from what the server request proposed
/// (`request`: its params); `None` for a decision the explorer does not know.
pub fn object_fields(name: &str, request: &Value) -> Option<Value> {
    let amendment = request["proposedExecpolicyAmendment"].clone();
    let amendment = if amendment.is_array() {
        amendment
    } else {
        json!([])
    };
    let network = request["proposedNetworkPolicyAmendments"][0].clone();
    let network = if network.is_object() {
        network
    } else {
        json!({"host": "example.com", "action": "allow"})
    };
    Some(match name {
        "acceptWithExecpolicyAmendment" => json!({"execpolicy_amendment": amendment}),
        "approved_execpolicy_amendment" => json!({"proposed_execpolicy_amendment": amendment}),
        "applyNetworkPolicyAmendment" | "network_policy_amendment" => {
            json!({"network_policy_amendment": network})
        }
        _ => return None,
    })
}

/// The answer making `choice` to a request whose params are `request`, over `accepting` (the
/// accepting answer of the explorer's kinds): its decision replaced, or its scope set.
pub fn answer(choice: &Choice, request: &Value, accepting: &Value) -> Value {
    let value = if choice.object {
        json!({ choice.name.clone(): object_fields(&choice.name, request).unwrap_or(Value::Null) })
    } else {
        json!(choice.name)
    };
    let mut answer = accepting.clone();
    answer[choice.field.as_str()] = value;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new release's object decision fails here by name until its fields are known.
    #[test]
    fn every_decision_of_the_release_is_classified() {
        for version in graders::protocol::releases() {
            let release = graders::protocol::release(version).unwrap();
            for method in release.server_requests() {
                match beyond_the_kinds(version, method) {
                    Ok(_) | Err(ChoiceError::NoSchema { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    #[test]
    fn the_choices_of_0_169_are_the_schemas_values_beyond_accept_decline_cancel() {
        let names = |method| -> Vec<String> {
            beyond_the_kinds("0.169.0", method)
                .unwrap()
                .into_iter()
                .map(|c| format!("{}={}", c.field, c.name))
                .collect()
        };
        assert_eq!(
            names("item/commandExecution/requestApproval"),
            [
                "decision=acceptForSession",
                "decision=acceptWithExecpolicyAmendment",
                "decision=applyNetworkPolicyAmendment"
            ]
        );
        assert_eq!(
            names("item/fileChange/requestApproval"),
            ["decision=acceptForSession"]
        );
        assert_eq!(names("item/permissions/requestApproval"), ["scope=session"]);
        assert!(names("mcpServer/elicitation/request").is_empty());
    }

    #[test]
    fn every_choice_answers_within_the_schema() {
        let release = graders::protocol::release("0.169.0").unwrap();
        let request = json!({"proposedExecpolicyAmendment": ["echo", "remembered"]});
        let accepting = |method: &str| match method {
            "item/permissions/requestApproval" => {
                json!({"permissions": {"network": {"enabled": true}}, "scope": "turn"})
            }
            _ => json!({"decision": "accept"}),
        };
        for method in release.server_requests() {
            for choice in beyond_the_kinds("0.169.0", method).unwrap_or_default() {
                let answer = answer(&choice, &request, &accepting(method));
                let verdict = release.check_answer(method, &answer);
                assert!(
                    matches!(verdict, graders::events::SchemaVerdict::Valid),
                    "{method} {answer}: {verdict:?}"
                );
            }
        }
    }
}
