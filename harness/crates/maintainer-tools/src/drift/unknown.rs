//! The unknown-method error of an app-server: Codex answers a method it does not know with
//! `Invalid request: unknown variant `X`, expected one of `a`, `b`, …`, which lists every client
//! method it accepts (more than its generated schema: legacy v1 methods too).

use anyhow::{bail, Result};
use serde_json::json;
use std::path::Path;
use std::process::Command;

pub(crate) const PROBE_METHOD: &str = "no/such/method";

/// Start `program ARGS…` with `CODEX_HOME=home`, initialize, send an unknown method and return
/// the error message (bounded; the child is always reaped).
pub fn unknown_method_error(program: &Path, args: &[&str], home: &Path) -> Result<String> {
    let mut command = Command::new(program);
    command.args(args).env("CODEX_HOME", home);
    let answers = super::ask::ask(command, &[(PROBE_METHOD, json!({}))])?;
    let answer = &answers[0];
    match answer["error"]["message"].as_str() {
        Some(message) => Ok(message.to_string()),
        None => bail!(
            "{} answered `{PROBE_METHOD}` without an error: {answer}",
            program.display()
        ),
    }
}

/// The method names an unknown-variant error lists, in its order.
pub(crate) fn listed_methods(message: &str) -> Result<Vec<String>> {
    let Some((_, list)) = message.split_once("expected one of ") else {
        bail!("not an unknown-variant error: {message}");
    };
    Ok(list
        .split(", ")
        .map(|m| m.trim().trim_matches('`').to_string())
        .filter(|m| !m.is_empty())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_read_in_order() {
        let message =
            "Invalid request: unknown variant `x`, expected one of `initialize`, `thread/start`";
        assert_eq!(
            listed_methods(message).unwrap(),
            ["initialize", "thread/start"]
        );
        assert!(listed_methods("something else").is_err());
    }
}
