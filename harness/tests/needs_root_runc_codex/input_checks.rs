//! Issue 36, "every input checked when it is read": the part that needs root (a tmpfs mounted
//! in a private mount namespace). The other checks are in the fast binary
//! (fast/input_checks.rs).

use crate::common::prereq;
use libtest_mimic::Trial;

pub fn trials() -> Vec<Trial> {
    let missing = (!nix::unistd::geteuid().is_root()
        || sandbox::system::which("unshare").is_none())
    .then(|| "root and unshare (a tmpfs mounted in a private mount namespace)".to_string());
    vec![prereq::trial(
        "a_full_disk_names_each_write_that_failed_and_why_needs_root",
        missing,
        || {
            a_full_disk_names_each_write_that_failed_and_why();
            Ok(())
        },
    )]
}

/// `harness run` of one fake cell with `--out` on a 256 KiB tmpfs that holds `fill_kib` KiB
/// already, in a private mount namespace; its stderr.
fn run_on_a_small_disk(fill_kib: u32) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let disk = scratch.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    // The folder, the fill and the binary are the script's arguments, never part of its text.
    let script = "mount -t tmpfs -o size=256k tmpfs \"$0\" && \
         { dd if=/dev/zero of=\"$0/fill\" bs=1k count=\"$1\" 2>/dev/null; true; } && \
         exec \"$2\" run --environment local --out \"$0/out\" \
         core-compatibility.runner-minimal-fake.local.message-marker";
    let ran = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(&disk)
        .arg(fill_kib.to_string())
        .arg(env!("CARGO_BIN_EXE_harness"))
        .env_remove("HARNESS_DRIVERS")
        .env_remove("CI")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
    assert_ne!(ran.status.code(), Some(0), "{stderr}");
    stderr
}

/// The fault sweep: on a full disk a cell was reported as "writing verdict.json" — the write
/// that failed first (the cell's own folders) and why were lost — and a run whose lock could
/// not be written said only "No space left on device". Each write that fails is now named, with
/// the OS's reason.
fn a_full_disk_names_each_write_that_failed_and_why() {
    let full = run_on_a_small_disk(300);
    assert!(
        full.contains("harness run: writing this run's pid into")
            && full.contains(".harness-run.lock: No space left on device"),
        "{full}"
    );
    // Room for the run's lock, none for the cell's folders.
    let nearly = run_on_a_small_disk(250);
    assert!(
        nearly.contains("verdict.json: No space left on device"),
        "{nearly}"
    );
    assert!(
        nearly.contains("the cell had ended: error: preparing the cell's folders: writing")
            && nearly.contains("AGENTS.md: No space left on device"),
        "{nearly}"
    );
}
