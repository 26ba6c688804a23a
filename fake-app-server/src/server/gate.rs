//! The checks every client method makes before it does anything: the handshake happened, and
//! the experimental fields it was sent are allowed. Their own module so that the thread lifecycle
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
