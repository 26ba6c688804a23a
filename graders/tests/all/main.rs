//! The graders' integration tests, in one binary: every test here is pure logic over event
//! streams and wire transcripts (no root, sandbox, Docker or Codex), and one binary links once
//! instead of once per file. Each former test file is a module, so `cargo test -p graders --
//! NAME` still selects the same tests; the stream builders they share are `support`. The tests
//! that replace the global allocator are the other binary, `own_allocator`.

mod support;

mod adversarial;
mod escalated_write;
mod launch_identity;
mod launch_policy;
mod other_suites;
mod plan_write_refused;
mod properties;
mod protocol_fooling;
mod protocol_requests;
mod protocol_task_binding;
mod protocol_turns;
mod protocol_wire;
mod reader;
mod runner_contract;
mod sources;
