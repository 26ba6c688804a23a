//! The opt-in drivers file of community SDKs (`drivers/community.toml`): it loads with the
//! suites, each SDK's declared bounds change what its cells expect, and the SDK whose models
//! reject every pinned Codex's `thread/start` answer is expected to pass no case that needs a turn.

use crate::published_drivers_file::with_drivers_file;
use graders::verdict::VerdictKind;
use suites::Matrix;

fn expected(matrix: &Matrix, name: &str) -> VerdictKind {
    let cell = matrix
        .cells
        .iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no cell {name}"));
    assert_eq!(cell.not_applicable, None, "{name}");
    cell.expected.verdict
}

#[test]
fn community_sdks_run_against_the_fake_and_the_real_codex_with_their_findings_expected() {
    let matrix = with_drivers_file("drivers/community.toml");
    for (name, verdict) in [
        // The 64 KiB line bound codex-python-sdk declares: a longer line may fail the run.
        ("protocol-size.codex-python-sdk-fake.local.line-1m", VerdictKind::Pass),
        // Its 30 s request bound, declared as codex-app-server-client's idle timeout.
        ("protocol-control.codex-app-server-client-fake.local.no-answer", VerdictKind::Pass),
        ("protocol-control.codex-python-sdk-fake.local.no-answer", VerdictKind::Fail),
        // The same findings on the real Codex, whose thread/start the harness's tap withholds.
        ("protocol-control.codex-app-server-client-codex.local.no-answer", VerdictKind::Pass),
        ("protocol-control.codex-python-sdk-codex.local.no-answer", VerdictKind::Fail),
        (
            "protocol-server-requests.codex-app-server-client-codex.local.permissions-approval",
            VerdictKind::Fail,
        ),
        (
            "protocol-handshake.codex-python-sdk-unofficial-codex-0-160-0.local.handshake",
            VerdictKind::Fail,
        ),
        (
            "codex-planning-read-only.codex-app-server-client-codex.local.escalated-write-user-decline",
            VerdictKind::Pass,
        ),
    ] {
        assert_eq!(expected(&matrix, name), verdict, "{name}");
    }
    let unofficial_turn_passes: Vec<String> = matrix
        .cells
        .iter()
        .filter(|c| c.id.runner.starts_with("codex-python-sdk-unofficial-"))
        .filter(|c| c.not_applicable.is_none() && c.expected.verdict == VerdictKind::Pass)
        .map(|c| c.name())
        .filter(|name| !name.ends_with(".initialize-error"))
        .collect();
    assert!(
        unofficial_turn_passes.is_empty(),
        "{unofficial_turn_passes:?}"
    );
}
