//! Issue 36: a drivers file that quotes its placeholders defensively (`--cwd "{workspace}"`,
//! `'{prompt}'`) and an `--out` path or a prompt holding `$(…)`, backquotes, quotes or `;` once
//! ran the substitution in a shell. The command is now split into words before any value is
//! put in, and executed without a shell: nothing runs, and the driver receives every value as
//! one exact argument.

use crate::common;

use matrix::cell::run_cell;
use matrix::context::CellContext;
use std::path::Path;

/// Each step of an injection, as a file it would create in the driver's folder.
const INJECTED: [&str; 4] = [
    "pwned-dollar",
    "pwned-backquote",
    "pwned-semicolon",
    "pwned-quote",
];

/// Text holding every way the old `sh -c` line was broken open, in double and single quotes.
const HOSTILE: &str =
    "a $(touch pwned-dollar) `touch pwned-backquote` ; touch pwned-semicolon ; ' ; touch pwned-quote ; ' \" b";

/// The driver: writes each argument it was given, then `$PROMPT_TOO`, NUL-terminated, into its
/// workspace.
const ARGV_DRIVER: &str =
    "#!/bin/sh\nfor arg in \"$@\" \"$PROMPT_TOO\"; do printf '%s\\0' \"$arg\"; done > \"$HARNESS_WORKSPACE/argv.bin\"\n";

fn context(out: &Path) -> CellContext {
    let mut ctx = CellContext::from_env().unwrap();
    ctx.out_root = out.to_path_buf();
    ctx.harness_binary = env!("CARGO_BIN_EXE_harness").into();
    ctx.repo_root = Some(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .into(),
    );
    ctx.ci = false;
    ctx
}

#[tokio::test]
async fn quoted_placeholders_holding_shell_syntax_run_nothing_and_arrive_as_one_argument_each() {
    let scratch = tempfile::tempdir().unwrap();
    let driver_dir = scratch.path().join("driver");
    std::fs::create_dir(&driver_dir).unwrap();
    std::fs::write(driver_dir.join("argv.sh"), ARGV_DRIVER).unwrap();
    // The evidence folder (so `{workspace}`, `{task}` and `{codex}`) below a hostile name.
    let out = scratch.path().join(HOSTILE.replace('/', "_"));
    std::fs::create_dir(&out).unwrap();

    let mut cell = suites::load()
        .unwrap()
        .cell("core-compatibility.runner-minimal-fake.local.message-marker")
        .unwrap()
        .clone();
    cell.case.task.insert("prompt".into(), HOSTILE.into());
    let declared = cell.runner.declared.as_mut().unwrap();
    declared.codex = suites::spec::CodexDiscovery::Arg;
    declared.base_dir = Some(driver_dir.clone());
    declared.command = concat!(
        r#"PROMPT_TOO='{prompt}' sh ./argv.sh --cwd "{workspace}" --prompt '{prompt}' "--task={task}" "#,
        r#"--codex "{codex}" --mode '{mode}' --idle "{idle_seconds}" {prompt}"#
    )
    .into();
    let result = run_cell(&context(&out), &cell).await;

    for injected in INJECTED {
        for folder in [&driver_dir, &out, scratch.path()] {
            assert!(
                !folder.join(injected).exists(),
                "`{injected}` was created in {}: a placeholder's value was run by a shell ({:?})",
                folder.display(),
                result.outcome
            );
        }
    }
    let own = report::layout::CellEvidence::new(&result.evidence_dir);
    let argv = std::fs::read(own.workspace().join("argv.bin"))
        .unwrap_or_else(|e| panic!("the driver did not run ({e}): {:?}", result.outcome));
    let argv: Vec<String> = argv
        .split(|b| *b == 0)
        .filter(|word| !word.is_empty())
        .map(|word| String::from_utf8(word.to_vec()).unwrap())
        .collect();
    let evidence = &result.evidence_dir;
    assert!(
        evidence.starts_with(&out),
        "the evidence is below the hostile folder"
    );
    let workspace = own.workspace().display().to_string();
    assert_eq!(argv[0], "--cwd");
    assert_eq!(argv[1], workspace);
    assert_eq!(argv[2..4], ["--prompt", HOSTILE]);
    assert_eq!(argv[4], format!("--task={}", own.task().display()));
    assert_eq!(argv[5], "--codex");
    assert!(argv[6].starts_with(&out.display().to_string()), "{argv:?}");
    assert_eq!(argv[7..11], ["--mode", "standard", "--idle", "2"]);
    // The last word, and the leading `PROMPT_TOO='{prompt}'` (an environment entry).
    assert_eq!(argv[11..], [HOSTILE, HOSTILE]);
}

/// The fault sweep: a 3.9 MB prompt made the driver's exec fail with E2BIG, and the cell's
/// reason was the whole command line with "Argument list too long" at its end. The reason now
/// names the step and the sizes, and stays short.
#[tokio::test]
async fn a_prompt_too_long_to_exec_is_a_short_reason_naming_the_step() {
    let out = tempfile::tempdir().unwrap();
    let mut cell = suites::load()
        .unwrap()
        .cell("core-compatibility.runner-minimal-fake.local.message-marker")
        .unwrap()
        .clone();
    let prompt = "x".repeat(3_900_000);
    cell.case.task.insert("prompt".into(), prompt.into());
    let result = run_cell(&context(out.path()), &cell).await;
    let described = result.describe();
    assert!(
        described.contains("starting the driver: argument list too long"),
        "{}",
        &described[..described.len().min(2000)]
    );
    assert!(described.len() < 4096, "a {} bytes reason", described.len());
    let events = common::evidence::read_text(&result.evidence_dir.join("events.jsonl")).unwrap();
    assert!(
        events.len() < 64 * 1024,
        "events.jsonl holds {} bytes",
        events.len()
    );
}

/// The reproduction of the issue, through the command line: a drivers file quoting every
/// placeholder, and an `--out` folder named like a hostile branch.
#[test]
fn a_drivers_file_quoting_its_placeholders_and_a_hostile_out_folder_run_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let driver_dir = scratch.path().join("driver");
    std::fs::create_dir(&driver_dir).unwrap();
    std::fs::write(driver_dir.join("argv.sh"), ARGV_DRIVER).unwrap();
    std::fs::write(
        driver_dir.join("drivers.toml"),
        r#"[drivers.quoting]
command = "PROMPT_TOO='{prompt}' sh ./argv.sh --cwd \"{workspace}\" --prompt '{prompt}' \"--task={task}\" --bin '{codex}' --mode \"{mode}\""
codex = "arg"
modes = ["standard"]
"#,
    )
    .unwrap();
    let out = scratch.path().join(HOSTILE.replace('/', "_"));
    let cell = "protocol-binding.quoting-fake.local.post-turn-events";
    assert_cmd::Command::cargo_bin("harness")
        .unwrap()
        .env_remove("HARNESS_DRIVERS")
        .env_remove("CI")
        .current_dir(&driver_dir)
        .args(["run", "--drivers", "drivers.toml", "--out"])
        .arg(&out)
        .arg(cell)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .code(1);
    for injected in INJECTED {
        for folder in [&driver_dir, &out, scratch.path()] {
            assert!(!folder.join(injected).exists(), "`{injected}` was created");
        }
    }
    let own = report::layout::CellEvidence::new(&out.join(cell));
    let argv = std::fs::read(own.workspace().join("argv.bin")).unwrap();
    let argv: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
    let workspace = own.workspace().display().to_string();
    assert_eq!(argv[1], workspace.as_bytes());
    let task = format!("--task={}", own.task().display());
    assert_eq!(argv[4], task.as_bytes());
    assert!(argv[6].starts_with(out.display().to_string().as_bytes()));
}
