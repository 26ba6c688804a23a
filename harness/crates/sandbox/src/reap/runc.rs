//! The runc containers and bundle folders a killed harness left behind. SIGKILL (or a crashed
//! session) ends a harness before its guards or its signal handler run, so its runc containers,
//! their processes and cgroups, and its bundle folders outlive it. The next harness removes
//! them, bounded in time — but only those whose recorded owner ([`crate::owner`]) is
//! gone: a container of a parallel, live harness, or one without an owner record (a kept bundle
//! rerun by hand), is never touched.
//!
//! A killed harness's `runc run` outlives it and may still be creating a container while the
//! pass runs; such a container is in no listing yet (no state at all, or a state folder without
//! `state.json`, which `runc list` and `runc state` skip) and would appear after the pass. So the pass kills
//! those creators first ([`super::creators`]), then takes every state folder of the harness's
//! prefix, listed or not; a container is judged by the owner record in its runc state (an OCI
//! annotation, [`owner::OWNER_ANNOTATION`]), else by its bundle's; and a bundle is removed only
//! once runc has no state of its container. A leftover of a gone owner that stays is a
//! failure of the pass ([`ReapReport::failed`]), never a silent pass.

use super::ReapReport;
use crate::cgroup::{self, Cgroup};
use crate::owner::{self, Liveness, Owner};
use crate::runc::{BUNDLE_PREFIX, ID_PREFIX};
use crate::teardown;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bound on one whole reaping pass; running out of it leaves the pass `incomplete`.
pub const REAP_DEADLINE: Duration = Duration::from_secs(30);

/// What `runc state` says of a container (the fields the harness reads).
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
    /// The config's annotations, the owner record among them ([`owner::OWNER_ANNOTATION`]).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// One reaping pass of this harness's containment scope.
pub fn reap_stale() -> ReapReport {
    reap_stale_of(&owner::scope())
}

/// One reaping pass over what owners of `scope` left: the creators still at work, then the
/// containers whose owner is gone (killed, deleted), then the bundle folders of a gone owner in
/// the temporary folder and next to the listed bundles.
pub(crate) fn reap_stale_of(scope: &str) -> ReapReport {
    let deadline = Instant::now() + REAP_DEADLINE;
    let mut report = ReapReport::default();
    super::creators::kill_gone_creators(scope, deadline, &mut report);
    let listed = match harness_containers() {
        Ok(listed) => listed,
        Err(reason) => {
            report.incomplete = Some(reason);
            return report;
        }
    };
    let mut folders = BTreeSet::from([std::env::temp_dir()]);
    folders.extend(
        listed
            .iter()
            .filter_map(|container| container.bundle.parent().map(Path::to_path_buf)),
    );
    let bundles = recorded_bundles(&folders);
    let state_dir = teardown::runc_state_dir();
    let unlisted: Vec<ListedContainer> = state_folder_ids()
        .unwrap_or_default()
        .into_iter()
        .filter(|id| !listed.iter().any(|container| &container.id == id))
        .map(|id| ListedContainer {
            id,
            pid: 0,
            status: "without state.json".into(),
            bundle: PathBuf::new(),
            annotations: BTreeMap::new(),
        })
        .collect();
    for container in listed.iter().chain(&unlisted) {
        if Instant::now() >= deadline {
            report.incomplete = Some(format!(
                "the {}s bound ran out before every container was checked",
                REAP_DEADLINE.as_secs()
            ));
            return report;
        }
        reap_container(container, scope, &bundles, deadline, &mut report);
    }
    for (bundle, record) in &bundles {
        if Instant::now() >= deadline {
            report.incomplete = Some(format!(
                "the {}s bound ran out before every bundle folder was checked",
                REAP_DEADLINE.as_secs()
            ));
            return report;
        }
        reap_bundle_folder(bundle, record, scope, &state_dir, &mut report);
    }
    report
}

/// The containers runc knows about whose id has the harness's prefix (bounded in time): each
/// one's `runc state`. Not `runc list`: runc 1.1 fails the whole listing when any state folder
/// vanishes while it reads them (a `runc delete` anywhere on the machine: one call in ten
/// failed under four deleting loops), and a pass without a listing reaps nothing. A container
/// gone meanwhile, or without `state.json` yet, is simply not in the answer.
pub fn harness_containers() -> Result<Vec<ListedContainer>, String> {
    let deadline = Instant::now() + REAP_DEADLINE;
    let mut listed = Vec::new();
    for id in state_folder_ids()? {
        if Instant::now() >= deadline {
            return Err(format!(
                "the {}s bound ran out before every container's `runc state` answered",
                REAP_DEADLINE.as_secs()
            ));
        }
        let stdout = teardown::runc_stdout(&["state", &id])
            .map_err(|err| format!("cannot run `runc state`: {err}"))?;
        if let Some(stdout) = stdout {
            listed.push(
                serde_json::from_slice(&stdout)
                    .map_err(|err| format!("cannot read `runc state {id}`: {err}"))?,
            );
        }
    }
    Ok(listed)
}

/// The ids of runc's state folders with the harness's prefix: containers runc has written down,
/// and those whose creation never reached `state.json`. No state folder at all: none.
fn state_folder_ids() -> Result<Vec<String>, String> {
    let folder = teardown::runc_state_dir();
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(format!("cannot read {}: {err}", folder.display())),
    };
    Ok(entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|id| id.starts_with(ID_PREFIX))
        .collect())
}

/// Every bundle folder in `folders` with an owner ([`owner::of_folder`]: its record, else its
/// name). One without is kept on purpose, or from before owner records: not ours to judge.
fn recorded_bundles(folders: &BTreeSet<PathBuf>) -> Vec<(PathBuf, Owner)> {
    let mut found = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let is_folder = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if !is_folder || !is_bundle_name(&entry.path()) {
                continue;
            }
            if let Some(record) = owner::of_folder(&entry.path(), BUNDLE_PREFIX) {
                found.push((entry.path(), record));
            }
        }
    }
    found
}

/// The owner of a container: the record runc keeps in its state, else its bundle's, else that
/// of a bundle prepared for it (a container without `state.json` names no bundle).
fn owner_of(container: &ListedContainer, bundles: &[(PathBuf, Owner)]) -> Option<Owner> {
    container
        .annotations
        .get(owner::OWNER_ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
        .or_else(|| {
            let names_a_bundle = !container.bundle.as_os_str().is_empty();
            names_a_bundle
                .then(|| owner::read(&container.bundle))
                .flatten()
        })
        .or_else(|| {
            bundles
                .iter()
                .find(|(_, record)| record.container == container.id)
                .map(|(_, record)| record.clone())
        })
}

/// Reap one container when its owner is of `scope` and gone; one that stays is a failure.
fn reap_container(
    container: &ListedContainer,
    scope: &str,
    bundles: &[(PathBuf, Owner)],
    deadline: Instant,
    report: &mut ReapReport,
) {
    let id = &container.id;
    let reason = match owner_of(container, bundles) {
        None => {
            let why = format!(
                "no owner record (no annotation, none in {:?}, no bundle prepared for it)",
                container.bundle
            );
            tracing::debug!(container = %id, "left alone: {why}");
            report.left_alone.push((id.clone(), why));
            return;
        }
        Some(record) if record.scope != scope => {
            let why = format!("its owner is of containment scope `{}`", record.scope);
            report.left_alone.push((id.clone(), why));
            return;
        }
        Some(record) if &record.container != id => {
            let why = format!("its owner record is for {}", record.container);
            report.left_alone.push((id.clone(), why));
            return;
        }
        Some(record) => match record.gone() {
            Ok(reason) => reason,
            Err(why) => {
                report.left_alone.push((id.clone(), why));
                return;
            }
        },
    };
    // Each container gets at least the removal's own bound, even late in the pass.
    let until = deadline.max(Instant::now() + Duration::from_secs(5));
    if !teardown::destroy_container_until(id, until) {
        tracing::warn!(target: "notice",
            "harness: could not delete container {id} ({}) left behind by a killed harness ({reason})",
            container.status
        );
        report.failed.push((
            id.clone(),
            format!(
                "runc still has it ({}) after `runc kill` and `runc delete --force` ({reason})",
                container.status
            ),
        ));
        return;
    }
    if container.bundle.as_os_str().is_empty() {
        let bundle = bundles
            .iter()
            .find(|(_, record)| &record.container == id)
            .map(|(bundle, _)| bundle.as_path());
        if let Err(why) = remove_unrecorded_cgroups(id, bundle) {
            report.failed.push((id.clone(), why));
            return;
        }
    }
    tracing::warn!(target: "notice",
        "harness: reaped container {id} ({}) left behind by a killed harness ({reason})",
        container.status
    );
    report.containers.push(id.clone());
}

/// The cgroups runc made for a container it never wrote down: `runc delete` removes only the
/// state folder of one, so its cgroups (runc places its init in them before `state.json`) are
/// emptied and removed here — at its config's `cgroupsPath`, else at its id (runc's default),
/// in the v2 hierarchy and the v1 ones; only the container's own folder, never a parent.
fn remove_unrecorded_cgroups(id: &str, bundle: Option<&Path>) -> Result<(), String> {
    let configured = bundle
        .and_then(|bundle| std::fs::read(bundle.join("config.json")).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|config| config["linux"]["cgroupsPath"].as_str().map(str::to_string));
    let relative = PathBuf::from(configured.as_deref().unwrap_or(id).trim_start_matches('/'));
    if relative.file_name() != Some(std::ffi::OsStr::new(id)) {
        return Err(format!(
            "its cgroupsPath {} does not end in its id: not removed",
            relative.display()
        ));
    }
    let removed = match cgroup::unified_mount() {
        Some(unified) => Cgroup {
            path: unified.join(&relative),
        }
        .destroy()
        .map(drop),
        None => cgroup::v1_mirrors(&relative)
            .iter()
            .try_for_each(|mirror| cgroup::remove_tree(mirror)),
    };
    removed.map_err(|err| format!("removing its cgroups: {err:#}"))
}

/// Remove a bundle folder whose owner is of `scope` and gone, once runc (its state in
/// `state_dir`) has no state of its container.
fn reap_bundle_folder(
    bundle: &Path,
    record: &Owner,
    scope: &str,
    state_dir: &Path,
    report: &mut ReapReport,
) {
    let shown = bundle.display().to_string();
    if record.scope != scope {
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
    // No container named: the owner was read from the folder's name, killed before it wrote
    // the record, so before it started anything.
    if !record.container.is_empty() && state_dir.join(&record.container).exists() {
        // Its container could not be deleted: that failure is reported with the container.
        report.left_alone.push((
            shown,
            format!("runc still has its container {}", record.container),
        ));
        return;
    }
    match remove_bundle(bundle) {
        Ok(()) => {
            tracing::warn!(target: "notice",
                "harness: removed bundle folder {shown} left behind by a killed harness ({reason})"
            );
            report.bundles.push(bundle.to_path_buf());
        }
        Err(why) => report.failed.push((shown, why)),
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

    /// The record of `container` by a process that has exited.
    fn gone_owner(container: &str) -> Owner {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let mut gone = Owner::current(container).expect("identity");
        gone.pid = child.id();
        child.wait().expect("wait");
        gone
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
        let no_state = tempfile::tempdir().expect("tempdir");
        let bundle = bundle_in(dir.path());
        let reap = |record: &Owner, report: &mut ReapReport| {
            reap_bundle_folder(&bundle, record, &owner::scope(), no_state.path(), report)
        };
        let live = owner::record(&bundle, "ccf-unit-live").expect("record");
        let mut report = ReapReport::default();
        reap(&live, &mut report);
        assert!(bundle.exists(), "a live owner's bundle was removed");
        assert!(report.bundles.is_empty());

        let gone = gone_owner("ccf-unit-live");
        let mut other_scope = gone.clone();
        other_scope.scope = "another-scope".into();
        reap(&other_scope, &mut report);
        assert!(bundle.exists(), "another scope's bundle was removed");
        reap(&gone, &mut report);
        assert!(!bundle.exists(), "a gone owner's bundle was kept");
        assert_eq!(report.bundles, vec![bundle.clone()]);
        assert!(report.failed.is_empty(), "{report:?}");
    }

    #[test]
    fn a_bundle_without_owner_record_or_whose_container_runc_still_has_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundle = bundle_in(dir.path());
        let folders = BTreeSet::from([dir.path().to_path_buf()]);
        assert!(recorded_bundles(&folders).is_empty());

        let gone = gone_owner("ccf-unit-listed");
        std::fs::write(
            bundle.join(owner::OWNER_FILE),
            serde_json::to_vec(&gone).expect("json"),
        )
        .expect("record");
        assert_eq!(
            recorded_bundles(&folders),
            vec![(bundle.clone(), gone.clone())]
        );
        // runc has a state folder of its container: listed or still being created.
        let state = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(state.path().join("ccf-unit-listed")).expect("state folder");
        let mut report = ReapReport::default();
        reap_bundle_folder(&bundle, &gone, &owner::scope(), state.path(), &mut report);
        assert!(
            bundle.exists(),
            "the bundle of a container runc still has was removed"
        );
        owner::forget(&bundle);
        assert!(owner::read(&bundle).is_none());
    }

    /// Killed between making the bundle folder and writing its record: the name still says who.
    #[test]
    fn a_bundle_left_before_its_owner_record_is_judged_by_its_name_and_a_kept_one_never() {
        let dir = tempfile::tempdir().expect("tempdir");
        let no_state = tempfile::tempdir().expect("tempdir");
        let folder_of = |owner: &Owner, random: &str| {
            let folder = dir.path().join(format!(
                "{BUNDLE_PREFIX}{}{random}",
                owner.name_part().expect("name")
            ));
            std::fs::create_dir(&folder).expect("folder");
            folder
        };
        let live = Owner::current("").expect("identity");
        let gone = gone_owner("");
        let unrecorded = folder_of(&gone, "AbC123");
        let kept = folder_of(&gone, "XyZ789");
        owner::forget(&kept);
        let alive = folder_of(&live, "Qrs456");
        let bundles = recorded_bundles(&BTreeSet::from([dir.path().to_path_buf()]));
        let read_back = bundles
            .iter()
            .find(|(folder, _)| folder == &alive)
            .map(|(_, owner)| owner);
        assert_eq!(read_back, Some(&live), "{bundles:?}");
        assert!(
            bundles.iter().all(|(folder, _)| folder != &kept),
            "{bundles:?}"
        );

        let mut report = ReapReport::default();
        for (bundle, record) in &bundles {
            reap_bundle_folder(
                bundle,
                record,
                &owner::scope(),
                no_state.path(),
                &mut report,
            );
        }
        assert_eq!(report.bundles, vec![unrecorded], "{report:?}");
        assert!(kept.exists() && alive.exists());
        assert!(report.failed.is_empty(), "{report:?}");
    }

    #[test]
    fn a_container_is_judged_by_its_annotation_then_its_bundle_then_a_bundle_prepared_for_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundle = bundle_in(dir.path());
        let recorded = owner::record(&bundle, "ccf-unit-judged").expect("record");
        let annotated = gone_owner("ccf-unit-judged");
        let mut container = ListedContainer {
            id: "ccf-unit-judged".into(),
            pid: 0,
            status: "stopped".into(),
            bundle: bundle.clone(),
            annotations: BTreeMap::from([(
                owner::OWNER_ANNOTATION.to_string(),
                serde_json::to_string(&annotated).expect("json"),
            )]),
        };
        assert_eq!(owner_of(&container, &[]), Some(annotated));
        container.annotations.clear();
        assert_eq!(owner_of(&container, &[]), Some(recorded.clone()));
        // No state.json: runc names no bundle.
        container.bundle = PathBuf::new();
        assert_eq!(owner_of(&container, &[]), None);
        assert_eq!(
            owner_of(&container, &[(bundle, recorded.clone())]),
            Some(recorded)
        );
    }
}
