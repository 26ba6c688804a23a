//! The launch identity: a digest of everything about a launch that decides whether a saved
//! session may be resumed under it, leaving out the profiles' filesystem and network rules
//! (those are sandbox tuning; a session saved under old rules must resume under new ones).

use super::{LaunchRequest, TurnParams};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Bumped when the identity's inputs change meaning.
const IDENTITY_VERSION: u32 = 1;

/// The inputs of the identity, as canonical JSON (object keys sorted by `serde_json`).
pub(super) fn identity_input(
    request: &LaunchRequest,
    argv: &[String],
    thread_params: &Value,
    turn_params: &TurnParams,
    follow_up: Option<&TurnParams>,
) -> Value {
    json!({
        "v": IDENTITY_VERSION,
        "mode": request.mode,
        "target": request.target,
        "workspace": request.workspace,
        "argv": argv.iter().map(|a| without_profile_rules(a)).collect::<Vec<_>>(),
        "thread": thread_params,
        "turn": turn_params,
        "follow_up_turn": follow_up,
    })
}

/// A `permissions.NAME={…}` override keeps only its name; every other argument is kept whole.
fn without_profile_rules(arg: &str) -> String {
    match arg.strip_prefix("permissions.") {
        Some(rest) => match rest.split_once('=') {
            Some((name, _rules)) => format!("permissions.{name}"),
            None => arg.to_string(),
        },
        None => arg.to_string(),
    }
}

pub(super) fn digest(input: &Value) -> String {
    // Deterministic: object keys come out sorted (serde_json's BTreeMap) or, with
    // `preserve_order`, in the fixed order of the `json!` literal above.
    let bytes = serde_json::to_vec(input).expect("JSON values always serialize");
    hex::encode(Sha256::digest(bytes))
}
