//! The answer a setting gives each server request: a schema-valid result or a JSON-RPC error,
//! never a grant nobody agreed to and never a token the client does not have.

use crate::setting::{OtherAnswer, Setting, ERROR_ANSWER};
use serde_json::{json, Value};

/// An answer to one server request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Result(Value),
    Error { code: i64, message: String },
}

impl Answer {
    /// The JSON-RPC message answering the request `id`.
    pub fn message(&self, id: &Value) -> Value {
        match self {
            Self::Result(result) => json!({"id": id, "result": result}),
            Self::Error { code, message } => {
                json!({"id": id, "error": {"code": code, "message": message}})
            }
        }
    }
}

/// JSON-RPC "method not found", for a request the client does not serve.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// A server error of the client's own: it refuses the request.
const REFUSED: i64 = -32000;

fn error(code: i64, message: &str) -> Answer {
    Answer::Error {
        code,
        message: message.into(),
    }
}

/// The answer `setting` gives the server request `method`.
pub fn answer(setting: &Setting, method: &str) -> Answer {
    let refusal = setting.approval_answer.as_str();
    let refused_with_error = refusal == ERROR_ANSWER;
    let other = setting.other_answer;
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            if refused_with_error {
                error(REFUSED, "the user did not approve")
            } else {
                Answer::Result(json!({"decision": refusal}))
            }
        }
        // The legacy ReviewDecision: `denied` continues the turn as `decline` does, `abort`
        // ends it as `cancel` does.
        "applyPatchApproval" | "execCommandApproval" => match refusal {
            ERROR_ANSWER => error(REFUSED, "the user did not approve"),
            "cancel" => Answer::Result(json!({"decision": "abort"})),
            _ => Answer::Result(
                json!({"decision": {"denied": {"rejection": "the user did not approve"}}}),
            ),
        },
        "mcpServer/elicitation/request" => match refusal {
            ERROR_ANSWER => error(REFUSED, "the user did not answer"),
            action => Answer::Result(json!({"action": action})),
        },
        // Granted permissions, not a decision: a refusal grants none.
        "item/permissions/requestApproval" => {
            if refused_with_error {
                error(REFUSED, "the user did not grant permissions")
            } else {
                Answer::Result(json!({"permissions": {}}))
            }
        }
        "item/tool/requestUserInput" if other == OtherAnswer::Result => {
            Answer::Result(json!({"answers": {}}))
        }
        "item/tool/call" if other == OtherAnswer::Result => Answer::Result(json!({
            "contentItems": [{"type": "inputText", "text": "this client registers no tools"}],
            "success": false
        })),
        "currentTime/read" if other == OtherAnswer::Result => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Answer::Result(json!({"currentTimeAt": now}))
        }
        "item/tool/requestUserInput" | "item/tool/call" | "currentTime/read" => {
            error(REFUSED, "this client does not serve it")
        }
        _ => error(METHOD_NOT_FOUND, "method not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Space;

    /// Every answer any setting gives a request of the release validates against the release's
    /// `*Response.json`.
    #[test]
    fn every_result_a_setting_gives_is_schema_valid() {
        let space = Space::of("0.169.0").unwrap();
        let release = graders::protocol::release("0.169.0").unwrap();
        for approval in &space.dimensions[6].values {
            for other in ["result", "error"] {
                let mut setting = space.nth(0).unwrap();
                setting.approval_answer = approval.clone();
                setting.other_answer = if other == "result" {
                    OtherAnswer::Result
                } else {
                    OtherAnswer::Error
                };
                for method in release.server_requests() {
                    if let Answer::Result(result) = answer(&setting, method) {
                        let verdict = release.check_answer(method, &result);
                        assert!(
                            matches!(verdict, graders::events::SchemaVerdict::Valid),
                            "{method} {setting}: {result} → {verdict:?}"
                        );
                    }
                }
            }
        }
    }
}
