//! `harness repro` end to end: the real binary, two real planning runs per failure, checked
//! through what it prints and the evidence it leaves.
//!
//! Every trial needs root and runc; the `real_codex` ones also need the pinned Codex (installed
//! on first use when npm is there), the `fake_fallback` ones hide it behind an empty
//! `CODEX_DRIVER_CACHE` so the fake app-server in real-sandbox mode runs instead. A trial that
//! cannot run here is reported as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use assert_cmd::Command;
use codex::provision;
use common::prereq;
use libtest_mimic::{Failed, Trial};
use matrix::context::CellContext;
use matrix::prereq::missing as missing_prerequisite;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Both runs take about a second each; the bound covers a cold Codex start on a loaded machine.
const REPRO_BOUND: Duration = Duration::from_secs(300);

#[derive(Clone, Copy)]
struct Case {
    failure: &'static str,
    environment: &'static str,
    signature: &'static str,
    /// The legacy profile's verdict (`startup-rejected` quotes `signature` in thread/start's
    /// error; `pass` starts the thread).
    legacy_verdict: &'static str,
    /// The fixed profile's verdict and a text its evidence must show.
    fixed_verdict: &'static str,
    fixed_quote: &'static str,
    network_disabled: bool,
    keep: bool,
    /// `--out` names the evidence folder relative to the current folder (runc's `cwd` must be
    /// absolute: the command line makes it so).
    relative_out: bool,
}

const RTM_NEWADDR: Case = Case {
    failure: "rtm-newaddr",
    environment: "daytona",
    signature: graders::signatures::messages::RTM_NEWADDR_SIGNATURE,
    legacy_verdict: "startup-rejected",
    fixed_verdict: "pass",
    fixed_quote: "Read-only file system",
    network_disabled: false,
    keep: false,
    relative_out: false,
};

const UIDMAP: Case = Case {
    failure: "uidmap",
    environment: "daytona-uidmap",
    signature: graders::signatures::messages::UID_MAP_SIGNATURE,
    legacy_verdict: "startup-rejected",
    fixed_verdict: "sandbox-failed-to-start",
    fixed_quote: graders::signatures::messages::UID_MAP_SIGNATURE,
    network_disabled: false,
    keep: true,
    relative_out: false,
};

/// A new environment, by its own name: both runs fail where bubblewrap cannot start.
const LSM_MOUNT_DENIED: Case = Case {
    failure: "lsm-mount-denied",
    environment: "lsm-mount-denied",
    signature: graders::signatures::messages::MOUNT_SLAVE_SIGNATURE,
    legacy_verdict: "startup-rejected",
    fixed_verdict: "sandbox-failed-to-start",
    fixed_quote: graders::signatures::messages::MOUNT_SLAVE_SIGNATURE,
    network_disabled: false,
    keep: false,
    relative_out: false,
};

/// Codex's `--no-proc` retry rescues both runs.
const PROC_MASKED: Case = Case {
    failure: "proc-masked",
    environment: "proc-masked",
    signature: graders::signatures::messages::MOUNT_PROC_SIGNATURE,
    legacy_verdict: "pass",
    fixed_verdict: "pass",
    fixed_quote: "Read-only file system",
    network_disabled: false,
    keep: false,
    relative_out: false,
};

/// No bubblewrap at all: Codex's sandbox helper panics.
const NO_BWRAP: Case = Case {
    failure: "no-bwrap",
    environment: "no-bwrap",
    signature: "bubblewrap is unavailable",
    legacy_verdict: "startup-rejected",
    fixed_verdict: "sandbox-failed-to-start",
    fixed_quote: graders::signatures::messages::NO_BWRAP_SIGNATURE,
    network_disabled: false,
    keep: false,
    relative_out: false,
};

/// The three classes added by issue 39, each by its own name and exact message.
const DEVPTS_DENIED: Case = Case {
    failure: "devpts-denied",
    environment: "devpts-denied",
    signature: graders::signatures::messages::MOUNT_DEVPTS_SIGNATURE,
    fixed_quote: graders::signatures::messages::MOUNT_DEVPTS_SIGNATURE,
    ..LSM_MOUNT_DENIED
};

const PROC_SYS_KERNEL_MASKED: Case = Case {
    failure: "proc-sys-kernel-masked",
    environment: "proc-sys-kernel-masked",
    signature: graders::signatures::messages::OVERFLOWUID_SIGNATURE,
    fixed_quote: graders::signatures::messages::OVERFLOWUID_SIGNATURE,
    ..LSM_MOUNT_DENIED
};

const INITRAMFS_ROOT: Case = Case {
    failure: "initramfs-root",
    environment: "initramfs-root",
    signature: graders::signatures::messages::PIVOT_ROOT_INITRAMFS_SIGNATURE,
    fixed_quote: graders::signatures::messages::PIVOT_ROOT_INITRAMFS_SIGNATURE,
    ..LSM_MOUNT_DENIED
};

#[derive(Clone, Copy, PartialEq)]
enum AppServer {
    RealCodex,
    FakeFallback,
}

impl AppServer {
    fn runners(self) -> [&'static str; 2] {
        match self {
            AppServer::RealCodex => ["runner-codex-legacy", "runner-codex"],
            AppServer::FakeFallback => ["runner-fake-legacy", "runner-fake"],
        }
    }
}

pub fn trials() -> Vec<Trial> {
    let network_disabled = Case {
        network_disabled: true,
        // Every sandboxed command needs `--unshare-net` too, so the write never runs.
        fixed_verdict: "sandbox-failed-to-start",
        fixed_quote: graders::signatures::messages::RTM_NEWADDR_SIGNATURE,
        ..RTM_NEWADDR
    };
    let trials = vec![
        trial(
            "repro_rtm_newaddr_real_codex_needs_root_and_runc_and_codex",
            RTM_NEWADDR,
            AppServer::RealCodex,
        ),
        trial(
            "repro_uidmap_real_codex_keep_needs_root_and_runc_and_codex",
            UIDMAP,
            AppServer::RealCodex,
        ),
        trial(
            "repro_rtm_newaddr_network_disabled_real_codex_needs_root_and_runc_and_codex",
            network_disabled,
            AppServer::RealCodex,
        ),
        trial(
            "repro_rtm_newaddr_fake_fallback_needs_root_and_runc",
            RTM_NEWADDR,
            AppServer::FakeFallback,
        ),
        trial(
            "repro_uidmap_fake_fallback_needs_root_and_runc",
            UIDMAP,
            AppServer::FakeFallback,
        ),
        trial(
            "repro_lsm_mount_denied_real_codex_needs_root_and_runc_and_codex",
            LSM_MOUNT_DENIED,
            AppServer::RealCodex,
        ),
        trial(
            "repro_proc_masked_real_codex_needs_root_and_runc_and_codex",
            PROC_MASKED,
            AppServer::RealCodex,
        ),
        trial(
            "repro_no_bwrap_real_codex_needs_root_and_runc_and_codex",
            NO_BWRAP,
            AppServer::RealCodex,
        ),
        trial(
            "repro_no_bwrap_fake_fallback_needs_root_and_runc",
            NO_BWRAP,
            AppServer::FakeFallback,
        ),
        trial(
            "repro_rtm_newaddr_relative_out_real_codex_needs_root_and_runc_and_codex",
            Case {
                relative_out: true,
                ..RTM_NEWADDR
            },
            AppServer::RealCodex,
        ),
        trial(
            "repro_devpts_denied_real_codex_needs_root_and_runc_and_codex",
            DEVPTS_DENIED,
            AppServer::RealCodex,
        ),
        trial(
            "repro_proc_sys_kernel_masked_real_codex_needs_root_and_runc_and_codex",
            PROC_SYS_KERNEL_MASKED,
            AppServer::RealCodex,
        ),
        trial(
            "repro_initramfs_root_real_codex_needs_root_and_runc_and_codex",
            INITRAMFS_ROOT,
            AppServer::RealCodex,
        ),
    ];
    trials
}

/// Why `case` cannot run here with `app_server`, if it cannot: its environment on runc (the
/// repro needs bundles to rerun by hand), the installed Codex for the real-Codex runs, and the
/// matrix's own check of the two cells it runs.
fn missing(case: Case, app_server: AppServer) -> Option<String> {
    prereq::environment_missing(case.environment)
        .or_else(|| {
            (app_server == AppServer::RealCodex)
                .then(prereq::codex_missing)
                .flatten()
        })
        .or_else(|| missing_cells(case, app_server))
}

fn missing_cells(case: Case, app_server: AppServer) -> Option<String> {
    let options = match CellContext::from_env() {
        Ok(options) => options,
        Err(e) => return Some(format!("{e:#}")),
    };
    let matrix = match suites::load() {
        Ok(matrix) => matrix,
        Err(e) => return Some(e.to_string()),
    };
    for runner in app_server.runners() {
        let name = cell_name(runner, case.environment);
        let Some(cell) = matrix.cell(&name) else {
            return Some(format!("the suites have no cell `{name}`"));
        };
        if let Some(reason) = missing_prerequisite(cell, &options) {
            return Some(reason);
        }
    }
    None
}

fn trial(name: &str, case: Case, app_server: AppServer) -> Trial {
    prereq::trial(name, missing(case, app_server), move || {
        check_repro(case, app_server)
    })
}

fn cell_name(runner: &str, environment: &str) -> String {
    format!("codex-planning-read-only.{runner}.{environment}.plan-write-refused")
}

fn check_repro(case: Case, app_server: AppServer) -> Result<(), Failed> {
    let out = tempfile::Builder::new().prefix("repro-test-").tempdir()?;
    let empty_cache = tempfile::tempdir()?;
    let mut command = Command::cargo_bin("harness")?;
    command
        .args(["repro", case.failure, "--out"])
        .timeout(REPRO_BOUND);
    if case.relative_out {
        let (parent, name) = (out.path().parent(), out.path().file_name());
        let (Some(parent), Some(name)) = (parent, name) else {
            return Err(format!("{} has no parent folder", out.path().display()).into());
        };
        command.arg(name).current_dir(parent);
    } else {
        command.arg(out.path());
    }
    if case.keep {
        command.arg("--keep");
    }
    if case.network_disabled {
        command.arg("--network-disabled");
    }
    match app_server {
        AppServer::RealCodex => {
            // The repro itself never downloads; the trial checked that Codex is installed.
            provision::ensure(provision::PINNED)?;
        }
        AppServer::FakeFallback => {
            command.env("CODEX_DRIVER_CACHE", empty_cache.path());
        }
    }
    let output = command.output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = || format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    if !output.status.success() {
        return Err(format!("harness repro exited with {}\n{}", output.status, context()).into());
    }
    let expect = |needle: &str| -> Result<(), Failed> {
        if stdout.contains(needle) {
            Ok(())
        } else {
            Err(format!("the output does not show `{needle}`\n{}", context()).into())
        }
    };
    match app_server {
        AppServer::RealCodex => expect(&format!("app-server: real Codex {}", provision::PINNED))?,
        AppServer::FakeFallback => {
            expect("app-server: the fake app-server in real-sandbox mode")?;
            expect("(the pinned Codex is not installed:")?;
        }
    }
    let [legacy_runner, fixed_runner] = app_server.runners();
    let (legacy, fixed) = stdout
        .split_once("-- 2. fixed planning profile")
        .ok_or_else(|| format!("no fixed-profile section\n{}", context()))?;
    let legacy_cell = format!("cell: {}", cell_name(legacy_runner, case.environment));
    let fixed_cell = format!("cell: {}", cell_name(fixed_runner, case.environment));
    let fixed_verdict = format!("verdict: {} — ", case.fixed_verdict);
    let legacy_verdict = format!("verdict: {} — ", case.legacy_verdict);
    let legacy_start = if case.legacy_verdict == "startup-rejected" {
        "thread/start: ERROR -32603 (seq "
    } else {
        "thread/start: OK (seq "
    };
    let legacy_text = if case.legacy_verdict == "startup-rejected" {
        case.signature
    } else {
        "Read-only file system"
    };
    let promised: [(&str, &str); 13] = [
        (legacy, &legacy_cell),
        (legacy, "profile: -c 'permissions."),
        (legacy, "\":root\"=\"none\""),
        (legacy, legacy_start),
        (legacy, legacy_text),
        (legacy, &legacy_verdict),
        (legacy, "bubblewrap: "),
        (fixed, &fixed_cell),
        (fixed, "\":root\"=\"read\""),
        (fixed, "thread/start: OK (seq "),
        (fixed, case.fixed_quote),
        (fixed, &fixed_verdict),
        (fixed, "Why:"),
    ];
    for (section, needle) in promised {
        if !section.contains(needle) {
            return Err(format!("`{needle}` is missing from the section\n{section}").into());
        }
    }
    expect(&format!("harness env probe {}", case.environment))?;

    // The evidence folders are the cells' own: graded verdicts, and no probe file was written.
    for (runner, verdict) in [
        (legacy_runner, case.legacy_verdict),
        (fixed_runner, case.fixed_verdict),
    ] {
        let dir = out.path().join(cell_name(runner, case.environment));
        expect(&format!("evidence: {}", dir.display()))?;
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json"))?)?;
        if written["verdict"]["verdict"] != verdict {
            return Err(format!(
                "{}: verdict.json says {}",
                dir.display(),
                written["verdict"]
            )
            .into());
        }
        if let Some(probe) =
            probe_files(&report::layout::CellEvidence::new(&dir).workspace())?.first()
        {
            return Err(format!("a probe file was written: {}", probe.display()).into());
        }
    }
    if case.keep {
        check_kept_bundles(&stdout)?;
    } else {
        expect(&format!("harness repro {} --keep", case.failure))?;
    }
    Ok(())
}

fn probe_files(workspace: &Path) -> Result<Vec<PathBuf>, Failed> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(workspace)? {
        let path = entry?.path();
        let is_probe = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("plan-write-probe-"));
        if is_probe {
            found.push(path);
        }
    }
    Ok(found)
}

/// `--keep` prints one `runc run --bundle B ID` per launch, with B left on disk; the test
/// removes them.
fn check_kept_bundles(stdout: &str) -> Result<(), Failed> {
    let bundles: Vec<PathBuf> = stdout
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|pair| pair[0] == "--bundle")
        .map(|pair| PathBuf::from(pair[1]))
        .collect();
    let result = if bundles.len() < 2 {
        Err(format!("expected a `runc run --bundle` line per run:\n{stdout}").into())
    } else if let Some(gone) = bundles.iter().find(|b| !b.join("config.json").is_file()) {
        Err(format!("kept bundle {} has no config.json", gone.display()).into())
    } else if !stdout.contains("\"method\":\"thread/start\"") {
        Err(format!("the lines to paste are missing:\n{stdout}").into())
    } else {
        Ok(())
    };
    for bundle in &bundles {
        let _ = std::fs::remove_dir_all(bundle);
    }
    result
}
