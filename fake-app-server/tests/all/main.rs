//! The fake's tests that drive it as a client would (a scripted JSON-RPC client over stdio), in
//! one test binary so that the crate links them once: one module per topic, the client and the
//! shared cases in `common`. Filters select by test name as before (`cargo test -p
//! fake-app-server -- installation_id`); a name now starts with its module (`admin::…`).
//!
//! Tests named `…_needs_bwrap` run the fake's real-sandbox mode and fail, saying what to
//! install, where bubblewrap is missing (`common::require_bwrap`).

mod common;

mod admin;
mod faults;
mod full_access;
mod personas;
mod protocol;
mod protocol_requests;
mod protocol_turns;
mod protocol_wire;
mod raw_events;
mod real_drivers;
mod recorded_answers;
mod remembered_answers;
mod scenarios;
mod settings;
mod turn_input;
