//! `harness drift` against the newest published Codex the matrix runs (0.171.0): the protocol
//! comparison names what the issue measured — five new client methods, the removed
//! `currentTime/read` server request, the new shape of `AgentMessageDisplay` — and the
//! unknown-method list grows by the same five methods.
//!
//! Needs the pinned Codex and 0.171.0 in the cache (`harness provision` installs both): without
//! them the test is reported as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use codex::provision;
use common::prereq;
use maintainer_tools::drift::{self, schema::Change};

fn newest_missing() -> Option<String> {
    provision::resolve(provision::NEWEST)
        .err()
        .map(|err| format!("Codex {}: {err:#}", provision::NEWEST))
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let trials = vec![prereq::trial(
        "drift_names_what_changed_in_0_171_needs_real_codex",
        prereq::codex_missing().or_else(newest_missing),
        || {
            drift_names_what_changed_in_0_171();
            Ok(())
        },
    )];
    trials
}

fn drift_names_what_changed_in_0_171() {
    let scratch = tempfile::tempdir().unwrap();
    let found = drift::protocol_drift(provision::NEWEST, scratch.path()).expect("drift");
    let added: Vec<&str> = found
        .schema
        .iter()
        .filter_map(|c| match c {
            Change::Added {
                kind: "client method",
                name,
            } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        added,
        [
            "modelProvider/default/set",
            "thread/realtime/list",
            "thread/search/cancel",
            "thread/search/stream",
            "thread/search/stream/cancel"
        ]
    );
    assert!(found.schema.contains(&Change::Removed {
        kind: "server request",
        name: "currentTime/read".into()
    }));
    let display: Vec<String> = found
        .schema
        .iter()
        .map(ToString::to_string)
        .filter(|c| c.contains("`AgentMessageDisplay."))
        .collect();
    assert!(
        display
            .iter()
            .any(|c| c.starts_with("- field `AgentMessageDisplay.action`"))
            && display
                .iter()
                .any(|c| c.starts_with("+ field `AgentMessageDisplay.oneOf")),
        "AgentMessageDisplay changes: {display:?}"
    );
    let mut listed = found.unknown_added.clone();
    listed.sort();
    assert_eq!(
        listed, added,
        "the unknown-method list grows by the new methods"
    );
    assert!(
        found.unknown_removed.is_empty(),
        "{:?}",
        found.unknown_removed
    );
    let report = drift::render(&found, &[]);
    assert!(
        report.contains("- client methods: 5 added, 0 removed"),
        "{report}"
    );
    assert!(
        report.contains("- - server request `currentTime/read`"),
        "{report}"
    );
}
