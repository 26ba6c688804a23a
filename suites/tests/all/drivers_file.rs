//! Drivers files: what a user may declare, what the harness refuses, and the cells they add.

use rstest::rstest;
use suites::{DriversFile, Extras, SuitesError};

pub(crate) const GOOD: &str = r#"
[drivers.my-runner]
about = "a driver written without the harness in mind"
command = "node dist/cli.js --cwd {workspace} --prompt {prompt} --mode {mode}"
codex = "env:CODEX_PATH"
modes = ["planning", "standard"]
profiles = ["protocol", "runner-contract"]
"#;

fn parse(text: &str) -> Result<DriversFile, SuitesError> {
    DriversFile::parse(text, "drivers.toml", None)
}

pub(crate) fn load(text: &str, codex: &[&str]) -> Result<suites::Matrix, SuitesError> {
    suites::load_with(&Extras {
        drivers: Some(parse(text)?),
        codex_versions: codex.iter().map(|v| v.to_string()).collect(),
    })
}

#[rstest]
#[case::unknown_key(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\ncomand = \"y\"\n",
    "unknown field `comand`"
)]
#[case::unknown_top_level_key("[driver.a]\ncommand = \"x\"\n", "unknown field `driver`")]
#[case::bad_codex_discovery(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"env:\"\nmodes = [\"standard\"]\n",
    "must be \"path\", \"arg\" or \"env:NAME\""
)]
#[case::codex_on_path_spelled_wrong(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"PATH\"\nmodes = [\"standard\"]\n",
    "codex = `PATH`"
)]
#[case::unknown_placeholder(
    "[drivers.a]\ncommand = \"x --cwd {wrkspace}\"\ncodex = \"path\"\nmodes = [\"standard\"]\n",
    "driver `a`: command: unknown placeholder `{wrkspace}`"
)]
#[case::unclosed_placeholder(
    "[drivers.a]\ncommand = \"x {prompt\"\ncodex = \"path\"\nmodes = [\"standard\"]\n",
    "unclosed `{`"
)]
#[case::arg_without_codex_placeholder(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"arg\"\nmodes = [\"standard\"]\n",
    "has no `{codex}`"
)]
#[case::codex_placeholder_without_arg(
    "[drivers.a]\ncommand = \"x --bin {codex}\"\ncodex = \"env:CODEX_BIN\"\nmodes = [\"standard\"]\n",
    "declare codex = \"arg\""
)]
#[case::unknown_placeholder_in_env(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\nenv = { A = \"{nope}\" }\n",
    "env: unknown placeholder `{nope}`"
)]
#[case::bad_env_name(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\nenv = { \"A-B\" = \"1\" }\n",
    "`A-B` is not a shell variable name"
)]
#[case::duplicate_names(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\n[drivers.a]\ncommand = \"y\"\n",
    "duplicate key"
)]
#[case::name_with_dots(
    "[drivers.\"my.runner\"]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\n",
    "name `my.runner` (driver) must be non-empty lowercase kebab-case without dots"
)]
#[case::upper_case_name(
    "[drivers.MyRunner]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"standard\"]\n",
    "name `MyRunner` (driver)"
)]
#[case::mode_that_does_not_exist(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"plannin\"]\n",
    "unknown variant `plannin`"
)]
#[case::no_modes(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = []\n",
    "`modes` is empty"
)]
#[case::mode_twice(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\", \"ask\"]\n",
    "mode `ask` is listed twice"
)]
#[case::missing_command(
    "[drivers.a]\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "missing field `command`"
)]
#[case::empty_command(
    "[drivers.a]\ncommand = \" \"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "`command` is empty"
)]
#[case::no_profiles(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nprofiles = []\n",
    "`profiles` is empty"
)]
#[case::unknown_profile(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nprofiles = [\"paperclip\"]\n",
    "unknown variant `paperclip`"
)]
#[case::profile_twice(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nprofiles = [\"protocol\", \"protocol\"]\n",
    "profile `protocol` is listed twice"
)]
#[case::nul_in_command(
    "[drivers.a]\ncommand = \"x\\u0000y\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "NUL byte"
)]
#[case::line_bound_out_of_range(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nmax_line_bytes = 10\n",
    "max_line_bytes = 10: must be between"
)]
#[case::idle_timeout_zero(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nidle_timeout_seconds = 0\n",
    "idle_timeout_seconds = 0: must be between 1 and 600 seconds"
)]
#[case::idle_timeout_fractional(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nidle_timeout_seconds = 1.5\n",
    "idle_timeout_seconds"
)]
#[case::unknown_outcome(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\noutcome = \"stdout\"\n",
    "unknown variant `stdout`"
)]
#[case::bad_contract(
    "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\ncontract = \"event\"\n",
    "unknown variant `event`"
)]
#[case::unbalanced_quote(
    "[drivers.a]\ncommand = \"x --cwd '{workspace}\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "driver `a`: command: `x --cwd '{workspace}` cannot be split into words"
)]
#[case::a_pipe_without_a_shell(
    "[drivers.a]\ncommand = \"x {prompt} | tee log\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "driver `a`: command: the word `|` is shell syntax, but the command is not run by a shell"
)]
#[case::a_redirection_without_a_shell(
    "[drivers.a]\ncommand = \"x 2>/dev/null\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "the word `2>/dev/null` is shell syntax"
)]
#[case::a_placeholder_in_a_shell_script(
    "[drivers.a]\ncommand = \"sh -c 'exec x --cwd \\\"{workspace}\\\"'\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "driver `a`: command: `{workspace}` sits in the script of a shell's `-c`"
)]
#[case::no_driver("", "declares no driver")]
fn bad_drivers_files_are_refused_naming_what_is_wrong(#[case] text: &str, #[case] wanted: &str) {
    let err = parse(text).expect_err("must be refused").to_string();
    assert!(err.starts_with("drivers.toml: "), "{err}");
    assert!(err.contains(wanted), "`{err}` does not contain `{wanted}`");
}

/// A good drivers file with `extra` appended: its cases, blocks and baseline entries.
#[rstest]
#[case::driver_named_like_a_shipped_runner(
    "[drivers.runner]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\n",
    "runner `runner-fake` would be generated, but suites.toml already has a runner of that name"
)]
#[case::case_in_an_unknown_suite(
    "[suites.my-suite]\nexpected_cells = 0\n",
    "suite `my-suite` is not a shipped suite"
)]
#[case::case_without_a_grader(
    "[suites.core-compatibility]\nexpected_cells = 1\n[suites.core-compatibility.cases.mine]\nabout = \"m\"\nscenario = \"builtin:message-marker\"\nmode = \"standard\"\nnetwork = false\ntask = { prompt = \"p\" }\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner-fake\"]\nenvironments = [\"local\"]\ncases = [\"mine\"]\n",
    "the graders know no case `mine` in this suite: name a shipped case's grader with `grade_as`"
)]
#[case::case_with_an_unknown_grade_as(
    "[suites.core-compatibility]\nexpected_cells = 1\n[suites.core-compatibility.cases.mine]\nabout = \"m\"\nscenario = \"builtin:message-marker\"\ngrade_as = \"marker\"\nmode = \"standard\"\nnetwork = false\ntask = { prompt = \"p\" }\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner-fake\"]\nenvironments = [\"local\"]\ncases = [\"mine\"]\n",
    "grade_as = `marker` is not a case the graders know"
)]
#[case::case_named_like_a_shipped_case(
    "[suites.core-compatibility]\nexpected_cells = 0\n[suites.core-compatibility.cases.message-marker]\nabout = \"m\"\nscenario = \"builtin:message-marker\"\nmode = \"standard\"\nnetwork = false\n",
    "case `core-compatibility.message-marker` is already a shipped case"
)]
#[case::block_of_another_size(
    "[suites.core-compatibility]\nexpected_cells = 3\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner-fake\"]\nenvironments = [\"daytona\"]\ncases = [\"message-marker\"]\n",
    "suite `core-compatibility` expects 3 cells but its matrix expands to 1"
)]
#[case::unused_case(
    "[suites.core-compatibility]\nexpected_cells = 0\n[suites.core-compatibility.cases.mine]\nabout = \"m\"\nscenario = \"builtin:message-marker\"\ngrade_as = \"message-marker\"\nmode = \"standard\"\nnetwork = false\n",
    "case `core-compatibility.mine` is declared but no matrix block uses it"
)]
#[case::block_with_an_unknown_runner(
    "[suites.core-compatibility]\nexpected_cells = 1\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner\"]\nenvironments = [\"daytona\"]\ncases = [\"message-marker\"]\n",
    "names unknown runner `my-runner`"
)]
#[case::block_repeating_a_generated_cell(
    "[suites.core-compatibility]\nexpected_cells = 1\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner-fake\"]\nenvironments = [\"local\"]\ncases = [\"message-marker\"]\n",
    "cell `core-compatibility.my-runner-fake.local.message-marker` appears twice"
)]
#[case::baseline_entry_for_no_cell(
    "[[expected]]\ncell = \"core-compatibility.my-runner-fake.userns-blocked.message-marker\"\nverdict = \"incomplete\"\nreason = \"r\"\n",
    "is not a cell of the matrix (no suite's matrix expands to it)"
)]
#[case::baseline_entry_for_a_not_applicable_cell(
    "[[expected]]\ncell = \"core-compatibility.my-runner-fake.local.ask-question\"\nverdict = \"incomplete\"\nreason = \"r\"\n",
    "the cell is not applicable, so it has no verdict to expect"
)]
#[case::baseline_entry_already_shipped(
    "[[expected]]\ncell = \"codex-planning-read-only.runner-fake.userns-blocked.plan-write-refused\"\nverdict = \"incomplete\"\nreason = \"r\"\n",
    "is listed twice (also in baseline.toml"
)]
#[case::baseline_entry_expecting_pass(
    "[[expected]]\ncell = \"core-compatibility.my-runner-fake.local.message-marker\"\nverdict = \"pass\"\nreason = \"r\"\n",
    "pass is the default"
)]
#[case::baseline_entry_without_reason(
    "[[expected]]\ncell = \"core-compatibility.my-runner-fake.local.message-marker\"\nverdict = \"incomplete\"\nreason = \"\"\n",
    "the reason is empty"
)]
fn bad_additions_to_the_matrix_are_refused(#[case] extra: &str, #[case] wanted: &str) {
    let err = load(&format!("{GOOD}\n{extra}"), &[])
        .expect_err("must be refused")
        .to_string();
    assert!(err.contains(wanted), "`{err}` does not contain `{wanted}`");
}

#[test]
fn a_declared_idle_timeout_is_read_and_absent_by_default() {
    let text = "[drivers.a]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\nidle_timeout_seconds = 2\n\n[drivers.b]\ncommand = \"x\"\ncodex = \"path\"\nmodes = [\"ask\"]\n";
    let file = parse(text).expect("a valid drivers file");
    assert_eq!(file.drivers["a"].idle_timeout_seconds, Some(2));
    assert_eq!(file.drivers["b"].idle_timeout_seconds, None);
}

#[test]
fn a_drivers_file_that_does_not_exist_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("drivers.toml");
    let err = DriversFile::read(&missing).unwrap_err();
    assert!(
        matches!(err, SuitesError::DriversFileUnreadable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("drivers.toml"), "{err}");
}

#[test]
fn a_read_drivers_file_runs_its_drivers_from_its_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drivers.toml");
    std::fs::write(&path, GOOD).unwrap();
    let file = DriversFile::read(&path).unwrap();
    assert_eq!(
        file.drivers["my-runner"].base_dir.as_deref(),
        Some(std::path::absolute(dir.path()).unwrap().as_path())
    );
}

#[test]
fn each_declared_driver_runs_where_the_suites_run_their_own_driver() {
    let matrix = load(GOOD, &[]).unwrap();
    for name in [
        "codex-planning-read-only.my-runner-codex.daytona.plan-write-refused",
        "codex-planning-read-only.my-runner-codex-0-160-0.daytona.plan-write-refused",
        "codex-planning-read-only.my-runner-fake.daytona.plan-write-refused",
        "core-compatibility.my-runner-codex.local.message-marker",
        "external-sandbox-launch.my-runner-codex.daytona.standard-launch",
        "startup-rejection.my-runner-fake.local.deterministic-rejection",
        "startup-rejection.my-runner-codex.daytona.deterministic-rejection",
        "transport-faults.my-runner-fake.local.hang",
    ] {
        let cell = matrix
            .cell(name)
            .unwrap_or_else(|| panic!("no cell {name}"));
        assert_eq!(cell.not_applicable, None, "{name}");
        assert!(cell.runner.declared.is_some());
    }
    // The real Codex cannot play the transport faults; the suite runs none there.
    assert!(matrix
        .cell("transport-faults.my-runner-codex.local.hang")
        .is_none());
    let shipped = suites::load().unwrap();
    for cell in &shipped.cells {
        assert_eq!(matrix.cell(&cell.name()), Some(cell), "shipped cells stay");
    }
    assert_eq!(matrix.codex_versions, ["0.169.0", "0.160.0", "0.171.0"]);
}

/// A block with `generated_runners = false` (the virtual machines', a minute a cell under QEMU's
/// emulator) keeps its own runners: neither a drivers file's nor `--codex`'s join it, while
/// the shipped runner's cells there stay.
#[test]
fn a_block_closed_to_generated_runners_gets_none() {
    let matrix = load(GOOD, &["0.165.0"]).unwrap();
    let vms: Vec<&str> = sandbox::catalogue::all()
        .into_iter()
        .filter(|env| env.vm.is_some())
        .map(|env| env.name)
        .collect();
    let runners: std::collections::BTreeSet<&str> = matrix
        .cells
        .iter()
        .filter(|cell| vms.contains(&cell.id.environment.as_str()))
        .map(|cell| cell.id.runner.as_str())
        .collect();
    assert_eq!(runners, ["runner-codex"].into(), "{runners:?}");
}

#[test]
fn cases_a_driver_cannot_express_are_not_applicable_with_the_reason() {
    let matrix = load(GOOD, &[]).unwrap();
    let reason = |name: &str| {
        matrix
            .cell(name)
            .unwrap_or_else(|| panic!("no cell {name}"))
            .not_applicable
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(
        reason("core-compatibility.my-runner-fake.local.ask-question"),
        "the case runs in mode `ask` and the driver declares only modes = [planning, standard]"
    );
    assert!(
        reason("core-compatibility.my-runner-codex.container.plan-revise-accept")
            .contains("a plan review loop"),
    );
    assert!(
        reason("launch-identity.my-runner-fake.local.resume-after-profile-change")
            .contains("`relaunch`"),
    );
    // A driver that takes plan reviews can run the review loop.
    let reviews = GOOD.replace("modes =", "plan_reviews = true\nmodes =");
    let matrix = load(&reviews, &[]).unwrap();
    let cell = matrix
        .cell("core-compatibility.my-runner-codex.container.plan-revise-accept")
        .unwrap();
    assert_eq!(cell.not_applicable, None);
    // The harness's own drivers take every task: only a declaration they lack (e.g. how to be
    // told to interrupt), or approvals they do not take, make a cell of theirs not applicable.
    assert!(matrix
        .cells
        .iter()
        .filter(|c| c.runner.declared.is_none())
        .all(|c| c.not_applicable.is_none()
            || !c.case.requires.is_empty()
            || c.case.task.contains_key("approvals")));
}

/// A task choice the driver is never told cannot be checked against its requests: a driver
/// whose command line names no `{workspace}` is not held to the thread's working folder, one
/// that names neither `{mode}` nor `{task}` not to the mode; one told them is.
#[test]
fn a_task_choice_the_driver_is_never_told_is_not_applicable() {
    let matrix = load(GOOD, &[]).unwrap();
    let reason = |matrix: &suites::Matrix, name: &str| {
        matrix
            .cell(name)
            .unwrap_or_else(|| panic!("no cell {name}"))
            .not_applicable
            .clone()
    };
    for case in ["workspace-cwd", "mode-planning", "mode-standard"] {
        let name = format!("protocol-task-binding.my-runner-fake.local.{case}");
        assert_eq!(reason(&matrix, &name), None, "{name}");
    }
    let untold = GOOD
        .replace("--cwd {workspace} ", "")
        .replace("--mode {mode}", "");
    let matrix = load(&untold, &[]).unwrap();
    let workspace = reason(
        &matrix,
        "protocol-task-binding.my-runner-fake.local.workspace-cwd",
    );
    assert!(workspace.unwrap().contains("no `{workspace}`"));
    for case in ["mode-planning", "mode-standard"] {
        let name = format!("protocol-task-binding.my-runner-codex.local.{case}");
        assert!(
            reason(&matrix, &name).unwrap().contains("`{mode}`"),
            "{name}"
        );
    }
    // The task envelope carries the mode.
    let envelope = untold.replace("--prompt {prompt}", "--task {task}");
    let matrix = load(&envelope, &[]).unwrap();
    assert_eq!(
        reason(
            &matrix,
            "protocol-task-binding.my-runner-fake.local.mode-planning"
        ),
        None
    );
}

#[test]
fn the_declared_cells_of_a_driver() {
    let matrix = load(GOOD, &["0.168.0"]).unwrap();
    let listing: Vec<String> = matrix
        .cells
        .iter()
        .filter(|c| matrix.from_drivers_file.contains(&c.name()))
        .map(|c| match &c.not_applicable {
            Some(reason) => format!("{} (not applicable: {reason})", c.name()),
            None => c.name(),
        })
        .collect();
    insta::assert_snapshot!("declared_cells_of_my_runner", listing.join("\n"));
}

#[test]
fn more_codex_versions_add_runners_without_a_rebuild() {
    let matrix = load(GOOD, &["0.168.0", "0.169.0"]).unwrap();
    assert_eq!(
        matrix.codex_versions,
        ["0.169.0", "0.160.0", "0.171.0", "0.168.0"]
    );
    let reference = &matrix.file.runners["runner-codex-0-168-0"];
    assert_eq!(reference.codex_version.as_deref(), Some("0.168.0"));
    assert!(matrix
        .cell("codex-planning-read-only.runner-codex-0-168-0.daytona.plan-write-refused")
        .is_some());
    assert!(matrix
        .cell("codex-planning-read-only.my-runner-codex-0-168-0.daytona.plan-write-refused")
        .is_some());
    // A version already in the matrix adds nothing.
    assert!(!matrix.file.runners.contains_key("runner-codex-0-169-0"));
    let only = suites::load_with(&Extras {
        drivers: None,
        codex_versions: vec!["0.171.0-alpha.2".into()],
    })
    .unwrap();
    assert!(only
        .cell("launch-identity.runner-codex-0-171-0-alpha-2.local.resume-after-profile-change")
        .is_some());
    for bad in ["0.171", "v0.171.0", "0.171.0;rm", "latest", "0.171.0-"] {
        let err = suites::load_with(&Extras {
            drivers: None,
            codex_versions: vec![bad.into()],
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("--codex: "), "{bad}: {err}");
    }
}

#[test]
fn the_users_cases_and_baseline_join_the_shipped_ones() {
    let extra = r#"
[suites.core-compatibility]
expected_cells = 4
[suites.core-compatibility.cases.long-marker]
about = "a long prompt's marker still comes back verbatim"
scenario = "builtin:message-marker"
grade_as = "message-marker"
mode = "standard"
network = false
task = { prompt = "Reply with the marker MARKER-c0ffee42 and nothing else. Really." }
[[suites.core-compatibility.matrix]]
runners = ["my-runner-fake", "my-runner-codex"]
environments = ["local", "daytona"]
cases = ["long-marker"]

[[expected]]
cell = "core-compatibility.my-runner-codex.daytona.long-marker"
verdict = "incomplete"
reason = "our driver gives up after 10 s and Codex in daytona is slower"
"#;
    let matrix = load(&format!("{GOOD}{extra}"), &[]).unwrap();
    let cell = matrix
        .cell("core-compatibility.my-runner-codex.daytona.long-marker")
        .unwrap();
    assert_eq!(cell.grader_case(), "message-marker");
    assert_eq!(cell.expected.verdict.to_string(), "incomplete");
    assert_eq!(
        matrix
            .cell("core-compatibility.my-runner-fake.local.long-marker")
            .unwrap()
            .expected,
        suites::Expectation::pass()
    );
}

#[test]
fn the_drivers_file_examples_of_the_driver_contract_load() {
    let doc = include_str!("../../../docs/driver-contract.md");
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect();
    let declaration = blocks
        .iter()
        .find(|b| b.contains("[drivers.my-runner]"))
        .expect("the doc declares my-runner");
    let cases = blocks
        .iter()
        .find(|b| b.contains("[suites.core-compatibility.cases.long-marker]"))
        .expect("the doc adds a case");
    let expected = blocks
        .iter()
        .find(|b| b.starts_with("[[expected]]") && b.contains("plan-write-refused"))
        .expect("the doc gives the minimal driver's baseline entry");
    let matrix = load(&format!("{declaration}\n{cases}\n{expected}"), &["0.168.0"]).unwrap();
    assert_eq!(
        matrix
            .cell("codex-planning-read-only.my-runner-codex.daytona.plan-write-refused")
            .unwrap()
            .expected
            .verdict
            .to_string(),
        "sandbox-failed-to-start"
    );
    assert!(matrix
        .cell("codex-planning-read-only.my-runner-codex.daytona.plan-write-refused")
        .is_some());
    assert_eq!(
        matrix
            .cell("core-compatibility.my-runner-codex.daytona.long-marker")
            .unwrap()
            .expected
            .verdict
            .to_string(),
        "incomplete"
    );
}

#[test]
fn a_driver_held_to_the_protocol_only_joins_no_runner_contract_suite() {
    let protocol_only = GOOD.replace("profiles = [\"protocol\", \"runner-contract\"]\n", "");
    let matrix = load(&protocol_only, &[]).unwrap();
    let mine: Vec<&suites::Cell> = matrix
        .cells
        .iter()
        .filter(|c| c.id.runner.starts_with("my-runner-"))
        .collect();
    assert!(
        mine.iter()
            .all(|c| c.profile == suites::spec::Profile::Protocol),
        "{:?}",
        mine.iter().map(|c| c.name()).collect::<Vec<_>>()
    );
    let both = load(GOOD, &[]).unwrap();
    assert!(both
        .cells
        .iter()
        .any(|c| c.id.runner == "my-runner-fake"
            && c.profile == suites::spec::Profile::RunnerContract));
}

#[test]
fn a_case_needing_a_declaration_the_driver_lacks_is_not_applicable_naming_the_key() {
    let with_case = format!(
        "{GOOD}\n[suites.core-compatibility]\n[suites.core-compatibility.cases.interrupted-marker]\nabout = \"m\"\nscenario = \"builtin:message-marker\"\ngrade_as = \"message-marker\"\nmode = \"standard\"\nnetwork = false\nrequires = [\"interrupt\"]\ntask = {{ prompt = \"p\" }}\n[[suites.core-compatibility.matrix]]\nrunners = [\"my-runner-fake\"]\nenvironments = [\"local\"]\ncases = [\"interrupted-marker\"]\n"
    );
    let matrix = load(&with_case, &[]).unwrap();
    let cell = matrix
        .cell("core-compatibility.my-runner-fake.local.interrupted-marker")
        .unwrap();
    let reason = cell.not_applicable.as_deref().unwrap();
    assert!(reason.contains("interrupt = \"sigint\""), "{reason}");
    let declared = with_case.replace(
        "modes = [\"planning\", \"standard\"]\n",
        "modes = [\"planning\", \"standard\"]\ninterrupt = \"sigint\"\n",
    );
    let matrix = load(&declared, &[]).unwrap();
    assert_eq!(
        matrix
            .cell("core-compatibility.my-runner-fake.local.interrupted-marker")
            .unwrap()
            .not_applicable,
        None
    );
}

/// What a driver's declarations make of a cell is part of its expectation, computed once when
/// the matrix is built: `harness run --list` and every report read it from there. A case that
/// needs an undeclared capability is not applicable, naming the key to declare.
#[test]
fn a_cell_graded_with_the_drivers_declarations_carries_it_in_its_expectation() {
    let matrix = load(GOOD, &[]).unwrap();
    let line = matrix
        .cell("protocol-size.my-runner-fake.local.line-1m")
        .unwrap();
    let note = line.expected.declarations.as_deref().unwrap();
    assert_eq!(
        Some(note.to_string()),
        suites::applicability::graded_with(line)
    );
    assert!(note.contains("declares no max_line_bytes"), "{note}");
    assert_eq!(line.expected.describe(), format!("expects pass; {note}"));
    let oversized = matrix
        .cell("transport-faults.my-runner-fake.local.oversized-line")
        .unwrap();
    assert!(oversized
        .not_applicable
        .as_deref()
        .unwrap()
        .contains("max_line_bytes = N"));
    assert_eq!(oversized.expected.declarations, None);

    let bounded = load(
        &GOOD.replace("modes = [", "max_line_bytes = 65536\nmodes = ["),
        &[],
    )
    .unwrap();
    let line = bounded
        .cell("protocol-size.my-runner-fake.local.line-1m")
        .unwrap();
    assert!(line
        .expected
        .describe()
        .contains("above the declared max_line_bytes = 65536"));
    // The harness's own drivers are graded without a note, and a cell with no legal line has none.
    for name in [
        "protocol-size.runner-fake.local.line-1m",
        "protocol-size.my-runner-fake.local.delta-burst",
    ] {
        if let Some(cell) = bounded.cell(name) {
            assert_eq!(cell.expected.declarations, None, "{name}");
        }
    }
    assert!(bounded
        .cell("protocol-size.my-runner-fake.local.delta-burst")
        .is_some());
}

#[test]
fn one_baseline_pattern_gives_one_reason_to_every_cell_it_matches() {
    let with_pattern = format!(
        "{GOOD}\n[[expected]]\ncell = \"codex-planning-read-only.my-runner-codex*.daytona.*\"\nverdict = \"sandbox-failed-to-start\"\nsignature = \"bwrap-loopback-rtm-newaddr\"\nreason = \"no permission profile: Codex's default read-only sandbox isolates the network\"\n"
    );
    let matrix = load(&with_pattern, &["0.168.0"]).unwrap();
    let matched: Vec<&suites::Cell> = matrix
        .cells
        .iter()
        .filter(|c| {
            c.id.suite == "codex-planning-read-only"
                && c.id.runner.starts_with("my-runner-codex")
                && c.id.environment == "daytona"
        })
        .collect();
    assert!(matched.len() >= 4, "{}", matched.len());
    for cell in matched {
        assert_eq!(
            cell.expected.verdict.as_str(),
            "sandbox-failed-to-start",
            "{}",
            cell.name()
        );
    }
    let nothing = with_pattern.replace("daytona.*\"", "no-such-env.*\"");
    let err = load(&nothing, &[]).unwrap_err().to_string();
    assert!(err.contains("the pattern matches no cell"), "{err}");
    let overlapping = format!(
        "{with_pattern}\n[[expected]]\ncell = \"codex-planning-read-only.my-runner-codex.daytona.plan-write-refused\"\nverdict = \"incomplete\"\nreason = \"r\"\n"
    );
    // A later exact entry overrides the pattern for its cell: the exception after the rule.
    let matrix = load(&overlapping, &[]).unwrap();
    let expect = |name: &str| matrix.cell(name).unwrap().expected.verdict.as_str();
    assert_eq!(
        expect("codex-planning-read-only.my-runner-codex.daytona.plan-write-refused"),
        "incomplete"
    );
    assert_eq!(
        expect("codex-planning-read-only.my-runner-codex-0-171-0.daytona.plan-write-refused"),
        "sandbox-failed-to-start"
    );
    // The rule after its exception would leave the exception dead: refused.
    let dead = format!(
        "{GOOD}\n[[expected]]\ncell = \"codex-planning-read-only.my-runner-codex.daytona.plan-write-refused\"\nverdict = \"incomplete\"\nreason = \"r\"\n[[expected]]\ncell = \"codex-planning-read-only.my-runner-codex*.daytona.*\"\nverdict = \"incomplete\"\nreason = \"r\"\n"
    );
    let err = load(&dead, &[]).unwrap_err().to_string();
    assert!(err.contains("decides no cell"), "{err}");
}

#[test]
fn a_cell_name_too_long_for_a_folder_is_refused_at_load() {
    let long = GOOD.replace(
        "[drivers.my-runner]",
        &format!("[drivers.{}]", "r".repeat(240)),
    );
    let err = load(&long, &[]).unwrap_err().to_string();
    assert!(err.contains("a cell name is a folder name"), "{err}");
}
