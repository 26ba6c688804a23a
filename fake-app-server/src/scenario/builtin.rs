//! The built-in scenarios, embedded as TOML files (`builtin/NAME.toml`) so they are documented
//! by example. The protocol cases' scenarios are named as their cases.

macro_rules! builtins {
    ($($name:literal),* $(,)?) => {
        /// Names accepted by `--scenario builtin:NAME` and [`super::Scenario::builtin`].
        pub const BUILTIN_NAMES: &[&str] = &[$($name),*];

        pub(super) fn text(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some(include_str!(concat!("builtin/", $name, ".toml"))),)*
                _ => None,
            }
        }
    };
}

builtins![
    "healthy",
    "plan-write-refused",
    "plan-revise-accept",
    "ask-question",
    "message-marker",
    "startup-rejected",
    "turn-failed",
    "crash-mid-turn",
    "hang",
    "garbage-line",
    "oversized-line",
    // protocol-server-requests
    "command-approval",
    "file-change-approval",
    "permissions-approval",
    // harness explore: what Codex remembers of an answer
    "command-approval-remembered",
    "file-change-approval-remembered",
    "permissions-approval-remembered",
    "user-input",
    "dynamic-tool-call",
    "mcp-elicitation",
    "auth-token-refresh",
    "attestation",
    "current-time",
    "legacy-apply-patch-approval",
    "legacy-exec-command-approval",
    "unknown-request",
    "untrusted-commands",
    // protocol-safe-default
    "command-escalation-refused",
    "file-change-refused",
    // protocol-turn-outcomes
    "retryable-error",
    "failed-turn",
    "interrupted-turn",
    "failed-turn-no-error",
    // protocol-binding
    "foreign-thread-events",
    "foreign-turn-events",
    "events-before-answer",
    "post-turn-events",
    "server-started-turn",
    "stale-request-after-turn",
    // protocol-forward-compat
    "every-notification",
    "unknown-notification",
    "unknown-item-type",
    "unknown-enum-values",
    "unknown-fields",
    // protocol-size
    "line-64k",
    "line-1m",
    "line-2m",
    "delta-burst",
    "stderr-flood",
    // protocol-control
    "initialize-error",
    "turn-start-error",
    "resume-error",
    "no-answer",
    "interrupt",
    "steer",
    "crash-resume",
    "crash-resume-forked",
    // protocol-credentials (protocol-handshake plays `healthy`)
    "secrets-not-forwarded",
    // the runner contract's skills, workspaces, environment, results and recovery
    "explicit-skill",
    "skillless",
    "unsafe-workspace",
    "allowlisted-environment",
    "home-secrets-sealed",
    "identical-retry-acknowledged",
    "reconciled-after-crash",
    "saved-turn-missing",
    "other-turn-active",
];

#[cfg(test)]
mod tests {
    /// docs/scenarios.md keeps a row for every built-in, so a new one cannot go undocumented.
    #[test]
    fn the_docs_name_every_builtin() {
        let docs = include_str!("../../../docs/scenarios.md");
        for name in super::BUILTIN_NAMES {
            assert!(
                docs.contains(&format!("`{name}`")),
                "docs/scenarios.md does not name the built-in `{name}`"
            );
        }
    }
}
