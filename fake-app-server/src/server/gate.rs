//! The checks every client method makes before it does anything: the handshake happened, the
//! experimental fields it was sent are allowed, the thread id it names is a UUID. Their own module so that the thread lifecycle
//! (`threads`) and the other handlers (`handlers`) both use them without needing each other.

use super::Shared;
use crate::protocol::RpcError;

/// Codex answers every method but `initialize` with `Not initialized` before the handshake.
pub(super) fn require_initialized(shared: &Shared) -> Result<(), RpcError> {
    if shared.state().initialized {
        Ok(())
    } else {
        Err(RpcError::invalid("Not initialized"))
    }
}

/// The experimentalApi gate: `METHOD.FIELD requires experimentalApi capability`.
pub(super) fn gate(
    shared: &Shared,
    method: &str,
    field: &str,
    present: bool,
) -> Result<(), RpcError> {
    if present && !shared.state().experimental_api {
        return Err(RpcError::invalid(format!(
            "{method}.{field} requires experimentalApi capability"
        )));
    }
    Ok(())
}

/// Codex parses thread ids as UUIDs before looking them up.
pub(super) fn check_thread_id(id: &str) -> Result<(), RpcError> {
    parse_id(id, "thread")
}

/// `thread/resume` and `thread/archive` word a malformed id as a session id (Codex 0.169,
/// measured).
pub(super) fn check_session_id(id: &str) -> Result<(), RpcError> {
    parse_id(id, "session")
}

/// Codex's answer for a well-formed id it does not hold: it names the parsed UUID, hyphenated
/// (a simple, braced or `urn:uuid:` form is reported as `8-4-4-4-12`; measured with 0.169 and
/// `harness explore`, corpus `thread-id-forms`).
pub(crate) fn thread_not_found(id: &str) -> RpcError {
    let named = uuid::Uuid::parse_str(id)
        .map(|uuid| uuid.hyphenated().to_string())
        .unwrap_or_else(|_| id.to_string());
    RpcError::invalid(format!("thread not found: {named}"))
}

fn parse_id(id: &str, noun: &str) -> Result<(), RpcError> {
    let Err(err) = uuid::Uuid::parse_str(id) else {
        return Ok(());
    };
    // Codex's uuid version words a bad character this way (1-based position); other errors keep
    // this uuid version's text.
    let bad = id
        .trim_start_matches("urn:uuid:")
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_hexdigit() || *c == '-'));
    let detail = match bad {
        Some((index, c)) => format!(
            "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `{c}` at {}",
            index + 1
        ),
        // Codex's uuid version words a wrong length of an id without hyphens against the simple
        // format (measured with 0.169 and `harness explore`: an empty id).
        None if !id.contains('-') && err.to_string().starts_with("invalid length") => format!(
            "invalid length: expected length 32 for simple format, found {}",
            id.chars().count()
        ),
        None => err.to_string(),
    };
    Err(RpcError::invalid(format!("invalid {noun} id: {detail}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `harness explore` (a `turn/start` whose thread never started): the fake's uuid
    /// version said `invalid length: found 0`.
    #[test]
    fn an_empty_thread_id_is_refused_in_codexs_words() {
        let refused = check_thread_id("").unwrap_err();
        assert_eq!(
            refused.message,
            "invalid thread id: invalid length: expected length 32 for simple format, found 0"
        );
        assert!(check_thread_id("01a2310e-f7aa-71a2-b7e9-e659bfd286b5").is_ok());
    }

    /// Found by `harness explore` (corpus `thread-id-forms`): the fake named the id as sent.
    #[test]
    fn a_missing_thread_is_named_by_its_hyphenated_uuid() {
        let hyphenated = "thread not found: 01a2310e-f7aa-71a2-b7e9-e659bfd286b5";
        for sent in [
            "01a2310ef7aa71a2b7e9e659bfd286b5",
            "{01a2310e-f7aa-71a2-b7e9-e659bfd286b5}",
            "urn:uuid:01a2310e-f7aa-71a2-b7e9-e659bfd286b5",
            "01A2310E-F7AA-71A2-B7E9-E659BFD286B5",
        ] {
            assert_eq!(thread_not_found(sent).message, hyphenated, "{sent}");
        }
    }
}
