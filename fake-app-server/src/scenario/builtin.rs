//! The built-in scenarios, embedded as TOML files so they are documented by example.

/// Names accepted by `--scenario builtin:NAME` and [`super::Scenario::builtin`].
pub const BUILTIN_NAMES: &[&str] = &[
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
];

pub(super) fn text(name: &str) -> Option<&'static str> {
    Some(match name {
        "healthy" => include_str!("builtin/healthy.toml"),
        "plan-write-refused" => include_str!("builtin/plan-write-refused.toml"),
        "plan-revise-accept" => include_str!("builtin/plan-revise-accept.toml"),
        "ask-question" => include_str!("builtin/ask-question.toml"),
        "message-marker" => include_str!("builtin/message-marker.toml"),
        "startup-rejected" => include_str!("builtin/startup-rejected.toml"),
        "turn-failed" => include_str!("builtin/turn-failed.toml"),
        "crash-mid-turn" => include_str!("builtin/crash-mid-turn.toml"),
        "hang" => include_str!("builtin/hang.toml"),
        "garbage-line" => include_str!("builtin/garbage-line.toml"),
        "oversized-line" => include_str!("builtin/oversized-line.toml"),
        _ => return None,
    })
}
