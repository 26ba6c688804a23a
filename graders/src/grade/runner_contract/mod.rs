//! The `runner-contract` profile's graders for the incident runner's whole driver contract
//! (docs/profiles/runner-contract.md, ../../mission-context "The incident runner's own driver
//! contract"), beside the suites it had before: skills, the Codex home kept from the model's
//! commands, unsafe workspaces, the app-server's allowlisted environment, idempotent results and
//! resume reconciliation. Each reads the wire translator's events, as the protocol cases do
//! (`super::protocol::Exchange`), cites the contract rule in its reasons, and passes only on
//! positive evidence.

pub mod env;

pub use env::{app_server_env_allowed, APP_SERVER_ENV_ALLOWLIST};
