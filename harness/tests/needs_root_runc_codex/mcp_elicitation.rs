//! `protocol-server-requests.mcp-tool-elicitation` against the pinned real Codex: the request is
//! asked for real (the harness's own MCP server asks Codex `elicitation/create` when the mock
//! model API calls its tool, `suites/scenarios/mcp-elicitation-tool.toml`), and every legitimate
//! answer kind is green.
//!
//! Copies of the minimal example driver answer the elicitation `accept` (with the form's one
//! boolean), `decline`, `cancel`; the unmodified driver answers with a JSON-RPC error. Each cell
//! must pass, and the tool output the model got back (the model log) must be the server's report
//! of the answer Codex relayed to it — the evidence that the request went through Codex to a
//! real MCP server and back: `ELICITATION_ACCEPT` (with the content), `_DECLINE`, `_CANCEL`, and
//! for the JSON-RPC error `ELICITATION_DECLINE` (Codex 0.169 relays an error as a decline;
//! measured). Before the case existed, no real-Codex cell sent `mcpServer/elicitation/request`:
//! the cells are missing and the test fails.

use crate::common;

use common::driver_copies::{apply, declare_copy, minimal_driver, run};
use common::prereq;

use std::path::Path;

/// The minimal driver's answer to every server request that is not an approval.
const REFUSE: &str =
    r#"send({"id": msg["id"], "error": {"code": -32601, "message": "unsupported"}})"#;

/// (driver, its answer to the elicitation, what the MCP server must report it got).
const ANSWERS: &[(&str, Option<&str>, &str)] = &[
    ("minimal", None, "ELICITATION_DECLINE"),
    (
        "elicit-accept",
        Some(r#"{"action": "accept", "content": {"open": True}}"#),
        r#"ELICITATION_ACCEPT {"action": "accept", "content": {"open": true}}"#,
    ),
    (
        "elicit-decline",
        Some(r#"{"action": "decline"}"#),
        "ELICITATION_DECLINE",
    ),
    (
        "elicit-cancel",
        Some(r#"{"action": "cancel"}"#),
        "ELICITATION_CANCEL",
    ),
];

const CASE: &str = "mcp-tool-elicitation";
/// How long each copy waits for a line (declared, so the harness's idle bound follows it).
const DRIVER_IDLE_SECONDS: u64 = 20;

fn answers_kinds_real_codex() {
    let dir = tempfile::tempdir().unwrap();
    let original = minimal_driver();
    let mut file = String::new();
    for (name, answer, _) in ANSWERS {
        let text = match answer {
            None => original.clone(),
            Some(result) => {
                let answer = format!(
                    "if method == \"mcpServer/elicitation/request\":\n                    send({{\"id\": msg[\"id\"], \"result\": {result}}})\n                else:\n                    {REFUSE}"
                );
                apply(&original, &[(REFUSE, &answer)], name).unwrap_or_else(|e| panic!("{e}"))
            }
        };
        declare_copy(dir.path(), &mut file, name, &text, DRIVER_IDLE_SECONDS);
    }
    let drivers = dir.path().join("drivers.toml");
    std::fs::write(&drivers, file).unwrap();
    let out = dir.path().join("out");
    let filter = format!("-codex.local.{CASE}");
    let cells = run(
        &drivers,
        &out,
        &[
            "--app-server",
            "codex",
            "--environment",
            "local",
            "--",
            &filter,
        ],
    );
    let mut failures = Vec::new();
    for (name, _, told) in ANSWERS {
        let cell = format!("protocol-server-requests.{name}-codex.local.{CASE}");
        let Some(found) = cells.get(&cell) else {
            failures.push(format!("{cell}: missing (cells: {:?})", cells.keys()));
            continue;
        };
        if found["verdict"] != "pass" {
            failures.push(format!(
                "{cell}: {} ({})",
                found["verdict"], found["reason"]
            ));
        }
        let outputs = tool_outputs(&out.join(&cell).join("model-log.jsonl"));
        if !outputs.iter().any(|o| o.contains(told)) {
            failures.push(format!(
                "{cell}: the MCP server's report `{told}` is not among the tool outputs {outputs:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The tool outputs of a model log.
fn tool_outputs(path: &Path) -> Vec<String> {
    common::evidence::json_records(path)
        .into_iter()
        .filter(|entry| entry["type"] == "tool-output")
        .filter_map(|entry| entry["output"].as_str().map(str::to_string))
        .collect()
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    vec![prereq::trial(
        "every_answer_kind_to_a_real_mcp_elicitation_is_relayed_and_green_real_codex",
        prereq::codex_missing(),
        || {
            answers_kinds_real_codex();
            Ok(())
        },
    )]
}
