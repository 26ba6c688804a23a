//! The client-side dynamic tools the driver registers on `thread/start`, with the JSON Schemas
//! their arguments must satisfy. The same schema is sent to the app-server and used to validate
//! each call, so what the model is told and what the driver accepts cannot drift apart.

use serde_json::{json, Value};

pub(crate) const FINISH: &str = "paperclip_finish";
pub(crate) const BLOCK: &str = "paperclip_block";

pub(crate) fn finish_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["done", "blocked"]},
            "summary": {"type": "string", "minLength": 1},
            "files": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["status", "summary"],
        "additionalProperties": false
    })
}

pub(crate) fn block_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "owner": {"type": "string", "minLength": 1},
            "action": {"type": "string", "minLength": 1},
            "summary": {"type": "string", "minLength": 1}
        },
        "required": ["owner", "action"],
        "additionalProperties": false
    })
}

/// The schema of a known tool.
pub(crate) fn schema_of(tool: &str) -> Option<Value> {
    match tool {
        FINISH => Some(finish_schema()),
        BLOCK => Some(block_schema()),
        _ => None,
    }
}

/// `dynamicTools` for `thread/start`.
pub(crate) fn dynamic_tools() -> Value {
    json!([
        {
            "type": "function",
            "name": FINISH,
            "description": "Report that the task is finished (status done) or cannot be finished (status blocked), with a summary and optionally the files changed.",
            "inputSchema": finish_schema()
        },
        {
            "type": "function",
            "name": BLOCK,
            "description": "Report that the task is blocked on someone else: who must act (owner), what they must do (action), and a summary.",
            "inputSchema": block_schema()
        }
    ])
}
