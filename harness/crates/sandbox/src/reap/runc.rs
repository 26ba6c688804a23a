//! The runc containers and bundle folders a killed harness left behind. SIGKILL (or a crashed
//! session) ends a harness before its guards or its signal handler run, so its runc containers,
//! their processes and cgroups, and its bundle folders outlive it. The next harness removes
//! them, bounded in time — but only those whose recorded owner ([`crate::owner`]) is
//! gone: a container of a parallel, live harness, or one without an owner record (a kept bundle
//! rerun by hand), is never touched.

use super::ReapReport;
use crate::owner::{self, Liveness};
use crate::runc::{BUNDLE_PREFIX, ID_PREFIX};
use crate::teardown;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bound on one whole reaping pass; what is left when it runs out waits for the next start.
pub const REAP_DEADLINE: Duration = Duration::from_secs(30);

/// One entry of `runc list --format json` (the fields the harness reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListedContainer {
    pub id: String,
    /// The container's init process on the host (0 once it is stopped).
    #[serde(default)]
    pub pid: u32,
    /// `created`, `running`, `paused` or `stopped`.
    #[serde(default)]
    pub status: String,
    pub bundle: PathBuf,
}

/// One reaping pass: the harness's runc containers whose owner is gone (killed, deleted, bundle
/// removed), then leftover bundle folders of a gone owner in the temporary folder and next to
/// the listed bundles.
pub fn reap_stale() -> ReapReport {
    let deadline = Instant::now() + REAP_DEADLINE;
    let mut report = ReapReport::default();
    let listed = match harness_containers() {
        Ok(listed) => listed,
        Err(reason) => {
            report.incomplete = Some(reason);
            return report;
        }
    };
    let mut still_listed = BTreeSet::new();
    for container in &listed {
        if Instant::now() >= deadline {
            report.incomplete = Some(format!(
                "the {}s bound ran out before every container was checked",
                REAP_DEADLINE.as_secs()
            ));
            return report;
        }
        if !reap_container(container, &mut report) {
            still_listed.insert(container.id.clone());
        }
    }

    let mut folders = BTreeSet::from([std::env::temp_dir()]);
    folders.extend(
        listed
            .iter()
            .filter_map(|container| container.bundle.parent().map(Path::to_path_buf)),
    );
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            if Instant::now() >= deadline {
                report.incomplete = Some(format!(
                    "the {}s bound ran out before every bundle folder was checked",
                    REAP_DEADLINE.as_secs()
                ));
                return report;
            }
            let is_folder = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_folder && is_bundle_name(&entry.path()) {
                reap_bundle_folder(&entry.path(), &still_listed, &mut report);
            }
        }
    }
    report
}

/// The containers runc knows about whose id has the harness's prefix (bounded in time).
pub fn harness_containers() -> Result<Vec<ListedContainer>, String> {
    let stdout = teardown::runc_stdout(&["list", "--format", "json"])
        .map_err(|err| format!("cannot run `runc list`: {err}"))?
        .ok_or("`runc list --format json` failed or did not answer in time")?;
    // runc prints `null` when it has no container.
    let listed: Option<Vec<ListedContainer>> = serde_json::from_slice(&stdout)
        .map_err(|err| format!("cannot read `runc list --format json`: {err}"))?;
    Ok(listed
        .unwrap_or_default()
        .into_iter()
        .filter(|container| container.id.starts_with(ID_PREFIX))
        .collect())
}

/// Reap one listed container when its owner is gone. Returns whether runc no longer has it.
fn reap_container(container: &ListedContainer, report: &mut ReapReport) -> bool {
    let id = &container.id;
    let reason = match owner::read(&container.bundle) {
        None => {
            let why = format!("no owner record in {}", container.bundle.display());
            tracing::debug!(container = %id, "left alone: {why}");
            report.left_alone.push((id.clone(), why));
            return false;
        }
        Some(record) if record.scope != owner::scope() => {
            let why = format!("its owner is of containment scope `{}`", record.scope);
            report.left_alone.push((id.clone(), why));
            return false;
        }
        Some(record) if &record.container != id => {
            let why = format!("its bundle's owner record is for {}", record.container);
            report.left_alone.push((id.clone(), why));
            return false;
        }
        Some(record) => match record.gone() {
            Ok(reason) => reason,
            Err(why) => {
                report.left_alone.push((id.clone(), why));
                return false;
            }
        },
    };
    teardown::destroy_container(id);
    if teardown::runc_state_dir().join(id).exists() {
        tracing::warn!(container = %id, "could not delete a container left behind by a killed harness ({reason})");
        tracing::warn!(target: "notice",
            "harness: could not delete container {id} left behind by a killed harness ({reason})"
        );
        return false;
    }
    let bundle_note = match remove_bundle(&container.bundle) {
        Ok(()) => {
            report.bundles.push(container.bundle.clone());
            format!("removed its bundle {}", container.bundle.display())
        }
        Err(why) => format!("kept its bundle: {why}"),
    };
    tracing::warn!(container = %id, bundle = %container.bundle.display(), "reaped a container left behind by a killed harness ({reason}); {bundle_note}");
    tracing::warn!(target: "notice",
        "harness: reaped container {id} left behind by a killed harness ({reason}); {bundle_note}"
    );
    report.containers.push(id.clone());
    true
}

/// Remove a bundle folder whose owner is gone and whose container runc no longer has.
fn reap_bundle_folder(bundle: &Path, still_listed: &BTreeSet<String>, report: &mut ReapReport) {
    let shown = bundle.display().to_string();
    let Some(record) = owner::read(bundle) else {
        // Being prepared right now, kept on purpose, or from before owner records: not ours
        // to judge.
        return;
    };
    if record.scope != owner::scope() {
        return;
    }
    let reason = match record.liveness() {
        Liveness::Gone(reason) => reason,
        Liveness::Alive => return,
        Liveness::Unknown(why) => {
            report.left_alone.push((shown, why));
            return;
        }
    };
    if still_listed.contains(&record.container) {
        report.left_alone.push((
            shown,
            format!("runc still has its container {}", record.container),
        ));
        return;
    }
    match remove_bundle(bundle) {
        Ok(()) => {
            tracing::warn!(bundle = %shown, "removed a bundle folder left behind by a killed harness ({reason})");
            tracing::warn!(target: "notice",
                "harness: removed bundle folder {shown} left behind by a killed harness ({reason})"
            );
            report.bundles.push(bundle.to_path_buf());
        }
        Err(why) => report.left_alone.push((shown, why)),
    }
}

fn is_bundle_name(path: &Path) -> bool {
    path.file_name()
        .map(|name| name.to_string_lossy().starts_with(BUNDLE_PREFIX))
        .unwrap_or(false)
}

/// `remove_dir_all`, but only on a folder named like a bundle with nothing mounted in or below
/// it: the host root is bound on `rootfs/` while a container runs, and a recursive delete must
/// never walk into a mount.
fn remove_bundle(bundle: &Path) -> Result<(), String> {
    if !is_bundle_name(bundle) {
        return Err(format!(
            "{} is not named {BUNDLE_PREFIX}*, so it is not removed",
            bundle.display()
        ));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| format!("cannot read /proc/self/mountinfo: {err}"))?;
    // Field 5 of each line is the mount point (spaces escaped as \040, which a bundle path made
    // by tempfile never contains).
    let mounted_inside = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|mount_point| Path::new(mount_point).starts_with(bundle));
    if mounted_inside {
        return Err(format!("something is mounted in {}", bundle.display()));
    }
    match std::fs::remove_dir_all(bundle) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(format!("cannot remove {}: {err}", bundle.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_in(dir: &Path) -> PathBuf {
        let bundle = dir.join(format!("{BUNDLE_PREFIX}unit"));
        std::fs::create_dir_all(bundle.join("rootfs")).expect("bundle");
        bundle
    }

    #[test]
    fn a_folder_not_named_like_a_bundle_is_never_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let other = dir.path().join("ccf-test-something");
        std::fs::create_dir(&other).expect("folder");
        assert!(remove_bundle(&other).is_err());
        assert!(other.exists());
    }

    #[test]
    fn a_bundle_of_a_gone_owner_is_removed_and_one_of_a_live_owner_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundle = bundle_in(dir.path());
        owner::record(&bundle, "ccf-unit-live").expect("record");
        let mut report = ReapReport::default();
        reap_bundle_folder(&bundle, &BTreeSet::new(), &mut report);
        assert!(bundle.exists(), "a live owner's bundle was removed");
        assert!(report.bundles.is_empty());

        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        let mut gone = owner::read(&bundle).expect("record reads back");
        gone.pid = pid;
        child.wait().expect("wait");
        std::fs::write(
            bundle.join(owner::OWNER_FILE),
            serde_json::to_vec(&gone).expect("json"),
        )
        .expect("rewrite record");
        reap_bundle_folder(&bundle, &BTreeSet::new(), &mut report);
        assert!(!bundle.exists(), "a gone owner's bundle was kept");
        assert_eq!(report.bundles, vec![bundle]);
    }

    #[test]
    fn a_bundle_without_owner_record_or_with_a_listed_container_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundle = bundle_in(dir.path());
        let mut report = ReapReport::default();
        reap_bundle_folder(&bundle, &BTreeSet::new(), &mut report);
        assert!(bundle.exists(), "a bundle without owner record was removed");

        let mut gone = owner::Owner::current("ccf-unit-listed").expect("identity");
        gone.start_time += 1;
        std::fs::write(
            bundle.join(owner::OWNER_FILE),
            serde_json::to_vec(&gone).expect("json"),
        )
        .expect("record");
        let listed = BTreeSet::from(["ccf-unit-listed".to_string()]);
        reap_bundle_folder(&bundle, &listed, &mut report);
        assert!(
            bundle.exists(),
            "the bundle of a container runc still has was removed"
        );
        owner::forget(&bundle);
        assert!(owner::read(&bundle).is_none());
    }
}
