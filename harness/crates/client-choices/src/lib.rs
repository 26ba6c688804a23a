//! The choices the protocol leaves a client of `codex app-server`, as data: the vocabulary read
//! from a release's JSON Schema ([`Vocabulary`]), the space of client settings over it
//! ([`Space`]: its whole cross product by index, and deterministic seeded samples; one point of
//! it a [`setting`]), the answer
//! a setting gives each server request ([`answers`]), and `population-driver`, a legitimate
//! driver that makes any setting's choices (docs/population.md).
//!
//! Two users: the legitimate population (a setting × a protocol cell must never be red) and the
//! protocol explorer (sessions generated over the same choices, compared fake against real).
//!
//! Layer 1: uses `graders` (the answers' schemas), nothing above it.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

pub mod answers;
mod schema;
pub mod setting;
mod space;

pub use setting::{Setting, SettingError, DIMENSIONS};
pub use space::{Space, Vocabulary};
