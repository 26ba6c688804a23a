//! The protocol's own sandbox parameter, read as evidence of the policy in force beside
//! permission profiles: the `sandbox` mode a client asks for on `thread/start` / `thread/resume`
//! (`read-only`, `workspace-write`, `danger-full-access`: `SandboxMode` of the schema), the
//! `sandboxPolicy` it sets on `turn/start` (`SandboxPolicy`: `{type: readOnly | workspaceWrite |
//! externalSandbox | dangerFullAccess, networkAccess…}`), and the `sandbox` the app-server
//! reports in its answer — the authoritative one.

use super::launch_config::Judgement;
use serde_json::Value;

/// The `SandboxMode` without write access.
const READ_ONLY_MODE: &str = "read-only";
const WRITABLE_MODES: &[&str] = &["workspace-write", "danger-full-access"];
/// The `SandboxPolicy.type` without write access.
pub(crate) const READ_ONLY_TYPE: &str = "readOnly";
const WIDER_TYPES: &[&str] = &["workspaceWrite", "externalSandbox", "dangerFullAccess"];

/// A `sandbox` mode a client asked for.
pub(crate) fn judge_mode(mode: &Value) -> Judgement {
    match mode.as_str() {
        Some(READ_ONLY_MODE) => Judgement::ReadOnly(format!("the sandbox mode `{READ_ONLY_MODE}`")),
        Some(mode) if WRITABLE_MODES.contains(&mode) => Judgement::Widens(format!(
            "it asks for the sandbox mode `{mode}`, which allows writes"
        )),
        _ => Judgement::Unverifiable(format!(
            "the sandbox mode {mode} is not one the grader knows (`{READ_ONLY_MODE}`, {})",
            WRITABLE_MODES.join(", ")
        )),
    }
}

/// A `SandboxPolicy` (set by a client, or reported by the app-server): read-only only when its
/// `type` is `readOnly` and it opens no network the launch keeps closed.
pub(crate) fn judge_policy(policy: &Value, network_allowed: bool) -> Judgement {
    match policy.get("type").and_then(Value::as_str) {
        Some(READ_ONLY_TYPE) => {
            let network = policy.get("networkAccess").and_then(Value::as_bool) == Some(true);
            if network && !network_allowed {
                Judgement::Widens(format!(
                    "the sandbox policy `{READ_ONLY_TYPE}` opens network access although the launch has network disabled"
                ))
            } else {
                Judgement::ReadOnly(format!("the sandbox policy `{READ_ONLY_TYPE}`"))
            }
        }
        Some(kind) if WIDER_TYPES.contains(&kind) => Judgement::Widens(format!(
            "the sandbox policy `{kind}` allows more than reading"
        )),
        _ => Judgement::Unverifiable(format!(
            "the sandbox policy {policy} has a `type` the grader does not know"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modes_and_policies() {
        assert!(matches!(
            judge_mode(&json!("read-only")),
            Judgement::ReadOnly(_)
        ));
        assert!(matches!(
            judge_mode(&json!("workspace-write")),
            Judgement::Widens(_)
        ));
        assert!(matches!(
            judge_mode(&json!("danger-full-access")),
            Judgement::Widens(_)
        ));
        assert!(matches!(
            judge_mode(&json!("readOnly")),
            Judgement::Unverifiable(_)
        ));
        let read_only = json!({"type": "readOnly", "networkAccess": false});
        assert!(matches!(
            judge_policy(&read_only, false),
            Judgement::ReadOnly(_)
        ));
        let networked = json!({"type": "readOnly", "networkAccess": true});
        assert!(matches!(
            judge_policy(&networked, false),
            Judgement::Widens(_)
        ));
        assert!(matches!(
            judge_policy(&networked, true),
            Judgement::ReadOnly(_)
        ));
        for wider in ["workspaceWrite", "externalSandbox", "dangerFullAccess"] {
            assert!(matches!(
                judge_policy(&json!({"type": wider}), true),
                Judgement::Widens(_)
            ));
        }
        assert!(matches!(
            judge_policy(&json!({"type": "new"}), true),
            Judgement::Unverifiable(_)
        ));
    }
}
