//! The fake's protocol lists come from the pinned Codex, checked here at test time against the
//! binary itself: the unknown-method error (which lists every client method, in Codex's order)
//! must read exactly as the real server's, and the notifications a scenario may name must be the
//! ones the pinned Codex's generated `ServerNotification.json` lists.
//!
//! Needs the pinned real Codex: without it the test is reported as ignored with the reason;
//! under `CI=true` it fails instead.

#[allow(dead_code)]
mod common;

use common::{codex_schema, prereq};
use harness::codex::provision;
use harness::drift::unknown::unknown_method_error;
use std::collections::BTreeSet;

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials = vec![
        prereq::trial(
            "the_unknown_method_error_is_the_pinned_codex_one_needs_real_codex",
            prereq::codex_missing(),
            || {
                the_unknown_method_error_is_the_pinned_codex_one();
                Ok(())
            },
        ),
        prereq::trial(
            "scenario_notification_names_are_the_pinned_codex_ones_needs_real_codex",
            prereq::codex_missing(),
            || {
                scenario_notification_names_are_the_pinned_codex_ones();
                Ok(())
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
}

fn the_unknown_method_error_is_the_pinned_codex_one() {
    let install = provision::resolve(provision::PINNED).expect("the pinned Codex");
    let scratch = tempfile::tempdir().unwrap();
    let real = unknown_method_error(&install.binary, &["app-server"], scratch.path())
        .expect("the pinned Codex's unknown-method error");
    let fake = unknown_method_error(
        std::path::Path::new(env!("CARGO_BIN_EXE_harness")),
        &["fake-app-server", "app-server"],
        scratch.path(),
    )
    .expect("the fake's unknown-method error");
    assert_eq!(
        fake, real,
        "the fake's client-method list (fake-app-server/src/protocol/client_methods.txt) is not the pinned Codex's; regenerate it from this error"
    );
}

fn scenario_notification_names_are_the_pinned_codex_ones() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("schema");
    codex_schema::generate(&dir);
    let real: BTreeSet<String> = harness::drift::schema::load(&dir)
        .expect("the generated schema")
        .notifications;
    assert!(real.len() > 50, "suspiciously few notifications: {real:?}");
    let fake: BTreeSet<String> = fake_app_server::protocol::server_notifications()
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = real.difference(&fake).collect();
    let extra: Vec<_> = fake.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "fake-app-server/src/protocol/server_notifications.txt differs from the pinned Codex: missing {missing:?}, not in Codex {extra:?}"
    );
}
