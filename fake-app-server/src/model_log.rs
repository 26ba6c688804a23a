//! What the model was told: one JSONL line per user message it read (a turn's input, and input
//! steered into a running turn), per tool call it made and per tool output it got back. Written by the fake app-server (which plays the model itself) and by the mock model
//! API in front of the real Codex; the harness turns these lines into `model.*` run events.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ModelLogEntry {
    /// The model called a tool.
    ToolCall {
        call_id: String,
        name: String,
        /// The arguments string exactly as the model sent it.
        arguments: String,
    },
    /// The tool output the model received for a call.
    ToolOutput { call_id: String, output: String },
    /// A user message the model received: a turn's input, or input a client steered into the
    /// running turn (`turn/steer`, or a `turn/start` while a turn runs), which Codex sends with
    /// the model's next request. The text of its text items, joined by newlines.
    UserInput { text: String },
}
