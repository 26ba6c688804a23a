//! Differential fidelity in the `local` environment: for every scenario both the fake and the
//! real Codex play, same verdict and same normalised driver-visible sequence; one insta snapshot
//! per scenario (named after the suite and case) of that sequence. Needs the real Codex (npm on
//! first use) and bubblewrap.

use harness::codex::fidelity;
use harness::matrix::MatrixOptions;

#[tokio::test]
#[ignore = "needs real Codex; fails today on real divergences (see `harness fidelity .local.`): the narrow planning profile denies CODEX_HOME so the real Codex rejects thread/start; the fake's sandbox projection has excludeSlashTmp=false where Codex has null; the fake starts agentMessage items with their full text where the streamed real one starts empty"]
async fn fake_and_real_codex_agree_locally_needs_real_codex() {
    let matrix = suites::load().expect("suites load");
    let pairs: Vec<_> = fidelity::pairs(&matrix, &[])
        .into_iter()
        .filter(|p| p.real.id.environment == "local" && p.real.id.runner == "runner-codex")
        .collect();
    assert!(!pairs.is_empty(), "the matrix has pairs to compare locally");
    let out = tempfile::tempdir().unwrap();
    let mut options = MatrixOptions::from_env().unwrap();
    options.out_root = out.path().to_path_buf();
    options.fake_program = env!("CARGO_BIN_EXE_harness").into();
    let mut failures = Vec::new();
    for pair in &pairs {
        let outcome = fidelity::run_pair(pair, &options).await;
        assert!(
            outcome.compared(),
            "{}: fake {} / real {}",
            outcome.pair,
            outcome.fake.verdict,
            outcome.real.verdict
        );
        if let Some(failure) = outcome.failure() {
            failures.push(format!("{}: {failure}", outcome.pair));
        }
        let name = format!("fidelity-{}-{}", pair.real.id.suite, pair.real.id.case);
        insta::assert_json_snapshot!(name, outcome.real.sequence);
    }
    assert!(
        failures.is_empty(),
        "fidelity failures:\n{}",
        failures.join("\n")
    );
}
