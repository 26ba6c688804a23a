//! Reaping the Docker containers a killed harness left behind. A Docker-runtime container lives
//! under dockerd, outside the cell's cgroup, so a SIGKILLed harness's containers outlive it.
//! Each one is labelled with its owner record ([`OWNER_LABEL`]: an [`Owner`] as JSON, the same
//! identity a runc bundle records), and the next harness to start removes those whose owner is
//! gone — never one of a live, parallel harness, of another containment scope, or without a
//! readable record (a container somebody else made). The host folder of its overlay files
//! (labelled [`OVERLAYS_LABEL`]) goes with it.

use super::ReapReport;
use crate::docker::{OVERLAYS_LABEL, OVERLAYS_PREFIX, OWNER_LABEL};
use crate::owner::{scope, Owner};
use crate::system::command_stdout;
use std::time::Duration;

/// Bound on `docker ps` and on each `docker rm -f`.
const DOCKER_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A labelled container.
struct Labelled {
    id: String,
    owner: String,
    overlays: String,
}

/// The labelled containers.
fn labelled() -> Result<Vec<Labelled>, String> {
    let filter = format!("label={OWNER_LABEL}");
    let format = format!(
        "{{{{.ID}}}}\t{{{{.Label \"{OWNER_LABEL}\"}}}}\t{{{{.Label \"{OVERLAYS_LABEL}\"}}}}"
    );
    let stdout = command_stdout(
        "docker",
        &[
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &filter,
            "--format",
            &format,
        ],
        DOCKER_COMMAND_TIMEOUT,
    )
    .map_err(|e| format!("cannot run `docker ps`: {e}"))?
    .ok_or("`docker ps` failed or did not answer in time")?;
    Ok(String::from_utf8_lossy(&stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            Some(Labelled {
                id: fields.next()?.to_string(),
                owner: fields.next()?.to_string(),
                overlays: fields.next().unwrap_or_default().to_string(),
            })
        })
        .collect())
}

/// Remove a stale container's overlay folder: only a folder named like one, in the temp dir.
fn remove_overlays(path: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(path);
    let named_like_one = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(OVERLAYS_PREFIX));
    if !named_like_one || path.parent() != Some(std::env::temp_dir().as_path()) {
        return None;
    }
    std::fs::remove_dir_all(path)
        .ok()
        .map(|()| path.to_path_buf())
}

/// Why the container with owner label `label` may be removed, or why it stays.
fn judge(label: &str) -> Result<String, String> {
    let owner: Owner =
        serde_json::from_str(label).map_err(|e| format!("unreadable owner label: {e}"))?;
    if owner.scope != scope() {
        return Err(format!(
            "its owner is of containment scope `{}`",
            owner.scope
        ));
    }
    owner.gone()
}

/// One pass: every labelled container whose owner is gone is removed (`docker rm -f`).
pub fn reap_stale() -> ReapReport {
    let mut report = ReapReport::default();
    let containers = match labelled() {
        Ok(containers) => containers,
        Err(why) => {
            report.incomplete = Some(why);
            return report;
        }
    };
    for Labelled {
        id,
        owner,
        overlays,
    } in containers
    {
        let reason = match judge(&owner) {
            Ok(reason) => reason,
            Err(why) => {
                tracing::debug!(container = %id, "left alone: {why}");
                report.left_alone.push((id, why));
                continue;
            }
        };
        match command_stdout("docker", &["rm", "-f", &id], DOCKER_COMMAND_TIMEOUT) {
            Ok(Some(_)) => {
                tracing::warn!(target: "notice",
                    "harness: reaped Docker container {id} left behind by a killed harness ({reason})"
                );
                report.containers.push(id);
                report.bundles.extend(remove_overlays(&overlays));
            }
            Ok(None) | Err(_) => {
                tracing::warn!(target: "notice",
                    "harness: could not remove Docker container {id} left behind by a killed harness ({reason})"
                );
                report
                    .failed
                    .push((id, "`docker rm -f` failed or did not answer in time".into()));
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_owner_another_scope_and_an_unreadable_label_are_left_alone_and_a_gone_owner_is_not() {
        let live = crate::docker::owner_label("container").unwrap();
        assert!(judge(&live).unwrap_err().contains("is alive"));
        let mut owner: Owner = serde_json::from_str(&live).unwrap();
        owner.scope = "someone-else".into();
        assert!(judge(&serde_json::to_string(&owner).unwrap())
            .unwrap_err()
            .contains("scope `someone-else`"));
        assert!(judge("not json")
            .unwrap_err()
            .starts_with("unreadable owner label"));
        // A process that has exited: its pid and start time no longer match a live one.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut gone: Owner = serde_json::from_str(&live).unwrap();
        gone.scope = scope();
        gone.pid = pid;
        gone.start_time = 1;
        assert!(judge(&serde_json::to_string(&gone).unwrap()).is_ok());
    }

    #[test]
    fn only_an_overlay_folder_in_the_temp_dir_is_removed() {
        let overlays = tempfile::Builder::new()
            .prefix(OVERLAYS_PREFIX)
            .tempdir()
            .unwrap()
            .keep();
        let other = tempfile::Builder::new()
            .prefix("not-an-overlay-")
            .tempdir()
            .unwrap();
        assert_eq!(remove_overlays(other.path().to_str().unwrap()), None);
        assert!(other.path().exists());
        let nested = other.path().join(format!("{OVERLAYS_PREFIX}x"));
        std::fs::create_dir(&nested).unwrap();
        assert_eq!(remove_overlays(nested.to_str().unwrap()), None);
        assert!(nested.exists());
        assert_eq!(remove_overlays(""), None);
        assert_eq!(
            remove_overlays(overlays.to_str().unwrap()),
            Some(overlays.clone())
        );
        assert!(!overlays.exists());
    }
}
