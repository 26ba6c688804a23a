//! The fake's personas come from the real Codex they play, checked here at test time against the
//! binaries themselves, for every release a fake runner of the matrix plays: the unknown-method
//! error (which lists every client method, in Codex's order) must read exactly as the real
//! server's; the notifications a scenario may name must be the ones that Codex's generated
//! `ServerNotification.json` lists; and what a driver reads around its threads (`model/list`,
//! `config/read` with its layers, `skills/list`, `account/read`, `collaborationMode/list`,
//! `permissionProfile/list`) must be answered alike, with the custom model provider every cell
//! configures. `harness drift VERSION` records a persona whose data differ.
//!
//! Needs those real Codex versions: without one its trials are reported as ignored with the
//! reason; under `CI=true` they fail instead.

use crate::common;

use codex::provision;
use common::{codex_schema, prereq};
use maintainer_tools::drift::persona::{answer_changes, settings_answers};
use maintainer_tools::drift::unknown::unknown_method_error;
use std::collections::BTreeSet;
use std::path::Path;

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let mut trials = Vec::new();
    for plays in codex_schema::fake_releases() {
        type Check = fn(&str);
        let checks: [(&str, Check); 3] = [
            (
                "the_unknown_method_error_is_the_real_codex_one",
                the_unknown_method_error_is_the_real_codex_one,
            ),
            (
                "scenario_notification_names_are_the_real_codex_ones",
                scenario_notification_names_are_the_real_codex_ones,
            ),
            (
                "settings_answers_are_the_real_codex_ones",
                settings_answers_are_the_real_codex_ones,
            ),
        ];
        for (name, check) in checks {
            let plays = plays.clone();
            trials.push(prereq::trial(
                format!("{name}_needs_real_codex::{plays}"),
                prereq::version_missing(&plays),
                move || {
                    check(&plays);
                    Ok(())
                },
            ));
        }
    }
    trials
}

fn fake_program() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_harness"))
}

fn the_unknown_method_error_is_the_real_codex_one(plays: &str) {
    let install = provision::resolve(plays).expect("the real Codex");
    let scratch = tempfile::tempdir().unwrap();
    let real = unknown_method_error(&install.binary, &["app-server"], scratch.path())
        .expect("the real Codex's unknown-method error");
    let fake = unknown_method_error(
        fake_program(),
        &["fake-app-server", "--codex-version", plays, "app-server"],
        scratch.path(),
    )
    .expect("the fake's unknown-method error");
    assert_eq!(
        fake, real,
        "the fake's client-method list (fake-app-server/personas/{plays}/client_methods.txt) is not Codex {plays}'s; `harness drift {plays}` records it"
    );
}

fn scenario_notification_names_are_the_real_codex_ones(plays: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("schema");
    codex_schema::generate_version(plays, &dir);
    let real: BTreeSet<String> = maintainer_tools::drift::schema::load(&dir)
        .expect("the generated schema")
        .notifications;
    assert!(real.len() > 50, "suspiciously few notifications: {real:?}");
    let fake: BTreeSet<String> = fake_app_server::persona::find(plays)
        .expect("a persona")
        .server_notifications()
        .map(str::to_string)
        .collect();
    let missing: Vec<_> = real.difference(&fake).collect();
    let extra: Vec<_> = fake.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "fake-app-server/personas/{plays}/server_notifications.txt differs from Codex {plays}: missing {missing:?}, not in Codex {extra:?}"
    );
}

fn settings_answers_are_the_real_codex_ones(plays: &str) {
    let install = provision::resolve(plays).expect("the real Codex");
    let scratch = tempfile::tempdir().unwrap();
    let real = settings_answers(
        &install.binary,
        &["app-server"],
        &scratch.path().join("real"),
    )
    .expect("the real Codex's answers");
    let fake = settings_answers(
        fake_program(),
        &["fake-app-server", "--codex-version", plays, "app-server"],
        &scratch.path().join("fake"),
    )
    .expect("the fake's answers");
    // Not vacuous: every question was answered with a result, not an error.
    for (method, answer) in &real {
        assert!(
            answer.get("error").is_none(),
            "Codex {plays} refused {method}: {answer}"
        );
    }
    let changes = answer_changes(&fake, &real);
    assert!(
        changes.is_empty(),
        "the fake playing {plays} answers otherwise than Codex {plays} (fake → real): {changes:#?}; `harness drift {plays}` records its persona"
    );
    // The comparison sees a persona's data: the fake playing any other release answers
    // otherwise.
    for other in fake_app_server::persona::versions() {
        if other == plays {
            continue;
        }
        let answers = settings_answers(
            fake_program(),
            &["fake-app-server", "--codex-version", other, "app-server"],
            &scratch.path().join(format!("fake-{other}")),
        )
        .expect("the fake's answers");
        assert!(
            !answer_changes(&answers, &real).is_empty(),
            "the fake playing {other} answers exactly as Codex {plays}: the comparison cannot tell releases apart"
        );
    }
}
