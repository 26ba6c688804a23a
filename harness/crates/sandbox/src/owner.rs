//! Who owns a runc container: the harness process that prepared it, written into its bundle so
//! that a later harness can tell a container of a killed run (reap it) from one of a parallel,
//! live run (leave it alone).
//!
//! A pid alone is not an identity (pids are reused), so the record also holds the process's start
//! time (field 22 of `/proc/PID/stat`, clock ticks since boot), the boot id (start times restart
//! at every boot) and the pid namespace (a pid means nothing in another one).

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The owner record's file name inside a bundle folder.
pub const OWNER_FILE: &str = "ccf-owner.json";
/// What a bundle kept on purpose holds instead of an owner record: never reaped, also not by
/// its name.
pub const KEPT_FILE: &str = "ccf-kept";
/// The OCI annotation that carries the same record in a container's config: runc keeps it in
/// its own state and `runc list` shows it, so a container stays judgeable after its bundle
/// folder is gone.
pub const OWNER_ANNOTATION: &str = "dev.ccf-harness.owner";

/// Names the containment scope of this harness (letters, digits, `-`, `_`): a harness reaps only
/// what an owner of its own scope left behind.
pub const SCOPE_VAR: &str = "HARNESS_CONTAINMENT_SCOPE";
const DEFAULT_SCOPE: &str = "default";

/// This harness's scope: `HARNESS_CONTAINMENT_SCOPE` when it is a valid name, else `default`.
pub fn scope() -> String {
    match std::env::var(SCOPE_VAR) {
        Ok(value)
            if !value.is_empty()
                && value.len() <= 64
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            value
        }
        _ => DEFAULT_SCOPE.to_string(),
    }
}

/// The identity of the harness process that owns a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The container this bundle was prepared for.
    pub container: String,
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat` (clock ticks after boot).
    pub start_time: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// The `/proc/self/ns/pid` link, e.g. `pid:[4026531836]`.
    pub pid_namespace: String,
    /// The owner's containment scope ([`scope`]): a harness reaps only
    /// what an owner of its own scope left behind. Records from before scopes are `default`.
    #[serde(default = "default_scope")]
    pub scope: String,
}

fn default_scope() -> String {
    DEFAULT_SCOPE.into()
}

/// Whether the owner of a record still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Gone, with the reason (for the log).
    Gone(String),
    /// The record cannot be judged from here (another pid namespace): never reap it.
    Unknown(String),
}

impl Owner {
    /// This process, as the owner of `container`.
    pub fn current(container: &str) -> Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            container: container.to_string(),
            pid,
            start_time: start_time(pid)?
                .context("reading this process's start time from /proc/self/stat")?,
            boot_id: boot_id()?,
            pid_namespace: pid_namespace()?,
            scope: scope(),
        })
    }

    pub fn liveness(&self) -> Liveness {
        match boot_id() {
            Ok(current) if current != self.boot_id => {
                return Liveness::Gone(format!("the machine rebooted since pid {}", self.pid))
            }
            Ok(_) => {}
            Err(err) => return Liveness::Unknown(format!("{err:#}")),
        }
        match pid_namespace() {
            Ok(current) if current != self.pid_namespace => {
                return Liveness::Unknown(format!(
                    "owner pid {} lives in pid namespace {}, not ours ({current})",
                    self.pid, self.pid_namespace
                ))
            }
            Ok(_) => {}
            Err(err) => return Liveness::Unknown(format!("{err:#}")),
        }
        match process_stat(self.pid) {
            None => Liveness::Gone(format!("owner pid {} has exited", self.pid)),
            Some(stat) if stat.start_time != self.start_time => Liveness::Gone(format!(
                "owner pid {} has exited (the pid now belongs to a newer process)",
                self.pid
            )),
            // A zombie never runs again: its cleanup cannot happen any more.
            Some(stat) if stat.state == 'Z' || stat.state == 'X' => {
                Liveness::Gone(format!("owner pid {} is a zombie", self.pid))
            }
            Some(_) => Liveness::Alive,
        }
    }

    /// The start of the name of a folder this owner makes (`<scope>-<pid>-<start time>-<pid
    /// namespace inode>-`, a random part follows): the folder is judgeable by its name alone
    /// from the moment it exists, before any record is written in it.
    pub fn name_part(&self) -> Result<String> {
        let namespace = self
            .pid_namespace
            .strip_prefix("pid:[")
            .and_then(|rest| rest.strip_suffix(']'))
            .with_context(|| format!("unreadable pid namespace {}", self.pid_namespace))?;
        Ok(format!(
            "{}-{}-{}-{namespace}-",
            self.scope, self.pid, self.start_time
        ))
    }

    /// Why what this owner left may be reaped (`Ok`: it is gone), or why it must stay.
    pub fn gone(&self) -> Result<String, String> {
        match self.liveness() {
            Liveness::Gone(reason) => Ok(reason),
            Liveness::Alive => Err(format!("owner pid {} is alive", self.pid)),
            Liveness::Unknown(why) => Err(why),
        }
    }
}

fn record_path(bundle: &Path) -> PathBuf {
    bundle.join(OWNER_FILE)
}

/// Write this process down as the owner of the container prepared in `bundle`; returns the
/// record.
pub fn record(bundle: &Path, container: &str) -> Result<Owner> {
    let owner = Owner::current(container)?;
    write(bundle, &owner)?;
    Ok(owner)
}

/// Write `owner` down in `bundle`.
pub fn write(bundle: &Path, owner: &Owner) -> Result<()> {
    let path = record_path(bundle);
    std::fs::write(&path, serde_json::to_vec(owner)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The owner of a folder named `<prefix>` + [`Owner::name_part`] + a random part: its record,
/// else (unless it is kept) its name's — a folder made by a process killed before it wrote the
/// record, in which nothing was started yet (the record comes first), so the owner read from
/// the name names no container.
pub fn of_folder(folder: &Path, prefix: &str) -> Option<Owner> {
    if let Some(recorded) = read(folder) {
        return Some(recorded);
    }
    if folder.join(KEPT_FILE).exists() {
        return None;
    }
    let name = folder.file_name()?.to_str()?.strip_prefix(prefix)?;
    let mut parts = name.rsplitn(5, '-');
    let _random = parts.next()?;
    let namespace: u64 = parts.next()?.parse().ok()?;
    let start_time = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    let scope = parts.next().filter(|scope| !scope.is_empty())?;
    Some(Owner {
        container: String::new(),
        pid,
        start_time,
        // Judged now, on this boot: a folder of an earlier boot whose name matches a live
        // process by chance is left alone, never a live one's reaped.
        boot_id: boot_id().ok()?,
        pid_namespace: format!("pid:[{namespace}]"),
        scope: scope.to_string(),
    })
}

/// The owner recorded in `bundle`; `None` when there is no readable record (a bundle being
/// prepared, a kept bundle, or one from before records existed: never reaped).
pub fn read(bundle: &Path) -> Option<Owner> {
    let text = std::fs::read(record_path(bundle)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Mark a bundle kept on purpose and drop its owner record, so that no later run reaps it.
pub fn forget(bundle: &Path) {
    let _ = std::fs::write(bundle.join(KEPT_FILE), b"");
    let _ = std::fs::remove_file(record_path(bundle));
}

struct ProcessStat {
    state: char,
    start_time: u64,
}

/// Hand-parsed rather than through the `procfs` crate: two fields of one file do not justify a
/// new dependency tree. The command name (field 2) may hold spaces and parentheses, so fields
/// are counted after its last `)`.
fn process_stat(pid: u32) -> Option<ProcessStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `fields[0]` is field 3 (state), so field 22 (starttime) is `fields[19]`.
    Some(ProcessStat {
        state: fields.first()?.chars().next()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`), while it exists.
pub(crate) fn started_at(pid: u32) -> Option<u64> {
    process_stat(pid).map(|stat| stat.start_time)
}

/// Whether the process `pid` that started at `start_time` no longer runs: gone, a zombie, or
/// its pid already another process's (pids wrap fast on a busy machine).
pub(crate) fn has_ended(pid: u32, start_time: u64) -> bool {
    process_stat(pid)
        .is_none_or(|stat| stat.start_time != start_time || stat.state == 'Z' || stat.state == 'X')
}

fn start_time(pid: u32) -> Result<Option<u64>> {
    Ok(process_stat(pid).map(|stat| stat.start_time))
}

fn boot_id() -> Result<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .context("reading /proc/sys/kernel/random/boot_id")?;
    Ok(text.trim().to_string())
}

fn pid_namespace() -> Result<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").context("reading /proc/self/ns/pid")?;
    Ok(link.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        let owner = Owner::current("ccf-test").expect("own identity");
        assert_eq!(owner.liveness(), Liveness::Alive);
    }

    #[test]
    fn a_reused_pid_is_not_the_owner() {
        let mut owner = Owner::current("ccf-test").expect("own identity");
        owner.start_time += 1;
        assert!(matches!(owner.liveness(), Liveness::Gone(_)));
    }

    #[test]
    fn an_exited_process_is_gone() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        let start = start_time(pid).expect("stat").unwrap_or(0);
        child.wait().expect("wait");
        let owner = Owner {
            pid,
            start_time: start,
            ..Owner::current("ccf-test").expect("own identity")
        };
        assert!(matches!(owner.liveness(), Liveness::Gone(_)));
    }

    #[test]
    fn another_boot_is_gone_and_another_pid_namespace_is_unknown() {
        let mut owner = Owner::current("ccf-test").expect("own identity");
        owner.boot_id = "another-boot".into();
        assert!(matches!(owner.liveness(), Liveness::Gone(_)));
        let mut owner = Owner::current("ccf-test").expect("own identity");
        owner.pid_namespace = "pid:[1]".into();
        assert!(matches!(owner.liveness(), Liveness::Unknown(_)));
    }

    #[test]
    fn a_command_name_with_parentheses_and_spaces_parses() {
        // Field 22 is what counts; the name is chosen to break a naive split.
        let dir = tempfile::tempdir().expect("tempdir");
        let odd = dir.path().join("a) b (c");
        std::os::unix::fs::symlink("/bin/sleep", &odd).expect("symlink");
        let mut child = std::process::Command::new(&odd)
            .arg("5")
            .spawn()
            .expect("spawn");
        let stat = process_stat(child.id());
        let _ = child.kill();
        let _ = child.wait();
        let stat = stat.expect("stat parses");
        assert!(stat.start_time > 0);
    }
}
