//! A process on the host (`local`) in a mount namespace of its own, where some folders are
//! read-only (the cells' evidence) except some folders below them (the driver's own part), and
//! some files are read-only (its task). The driver under test runs this way, so it cannot
//! rewrite the evidence it is graded from.
//!
//! How, between fork and exec:
//! 1. a new mount namespace — as root directly; otherwise inside a new user namespace that maps
//!    the caller's own uid and gid (what an unprivileged process may map);
//! 2. the mounts made private, then bind mounts: each read-only folder on itself, each writable
//!    folder below it on itself, then the read-only folders remounted read-only (a bind keeps
//!    the flags of the mount it was taken from, so the writable binds are made first);
//! 3. then a further user namespace (and mount namespace), mapping the same uid and gid: the
//!    mounts of step 2, made in a more privileged namespace, are now locked — the process can
//!    neither unmount them nor remount them writable, has no capability outside its own user
//!    namespace (no `setns` back, no `/proc/PID/root` of the harness: ptrace access across
//!    user namespaces needs a capability it lacks), and keeps its uid.
//!
//! Where the kernel allows none of this (no user namespaces for an unprivileged harness),
//! [`available`] says why and the caller falls back to what docs/prerequisites.md describes.

use crate::launcher::{Launcher, PreparedCommand, ProcessSpec};
use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// What the process may write and what it may only read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Folders made read-only (recursively bound first, so what is mounted below stays).
    pub read_only: Vec<PathBuf>,
    /// Folders below a read-only one that stay writable.
    pub writable: Vec<PathBuf>,
    /// Files made read-only (below a writable folder).
    pub read_only_files: Vec<PathBuf>,
}

/// Everything the child needs, prepared before the fork: no allocation happens after it.
struct Plan {
    /// Bind these on themselves (read-only folders, then writable ones, then files).
    binds: Vec<(CString, libc::c_ulong)>,
    /// Then remount these read-only, each with the flags its mount had (a mount inherited from
    /// a more privileged namespace keeps nosuid/nodev/noexec/atime locked; leaving them out of
    /// a remount is refused).
    read_only: Vec<(CString, libc::c_ulong)>,
    /// Whether the first namespace needs a user namespace of its own (not root).
    unprivileged: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", path.display()))
}

/// The flags of the mount holding `path`, as mount(2) flags for a remount.
fn mount_flags(path: &Path) -> Result<libc::c_ulong> {
    let c = c_path(path)?;
    // SAFETY: statvfs writes into the zeroed struct we own.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statvfs {}", path.display()));
    }
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(pairs
        .iter()
        .filter(|(st, _)| stat.f_flag & *st != 0)
        .fold(0, |flags, (_, ms)| flags | *ms))
}

impl Plan {
    fn new(isolation: &Isolation, uid: u32, gid: u32) -> Result<Plan> {
        let mut binds = Vec::new();
        let mut read_only = Vec::new();
        for folder in &isolation.read_only {
            binds.push((c_path(folder)?, libc::MS_BIND | libc::MS_REC));
            read_only.push((c_path(folder)?, mount_flags(folder)?));
        }
        for folder in &isolation.writable {
            binds.push((c_path(folder)?, libc::MS_BIND | libc::MS_REC));
        }
        for file in &isolation.read_only_files {
            binds.push((c_path(file)?, libc::MS_BIND));
            read_only.push((c_path(file)?, mount_flags(file)?));
        }
        Ok(Plan {
            binds,
            read_only,
            unprivileged: uid != 0,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        })
    }

    /// Between fork and exec: system calls only.
    fn enter(&self) -> std::io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: plain system calls on strings prepared before the fork.
        unsafe {
            if self.unprivileged {
                // A process whose uid was just changed (a root harness starting a driver as
                // another user) is not dumpable, and its /proc/self files then belong to root:
                // it could not write its own uid map.
                check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
                check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                self.write_maps()?;
            } else {
                check(libc::unshare(libc::CLONE_NEWNS))?;
            }
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (path, flags) in &self.binds {
                check(libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    *flags,
                    std::ptr::null(),
                ))?;
            }
            for (path, flags) in &self.read_only {
                check(libc::mount(
                    std::ptr::null(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | *flags,
                    std::ptr::null(),
                ))?;
            }
            // Lock the mounts: from here on they came from a more privileged namespace.
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
            self.write_maps()
        }
    }

    /// Map the caller's own uid and gid in its new user namespace (`setgroups` denied first, as
    /// an unprivileged gid map requires).
    unsafe fn write_maps(&self) -> std::io::Result<()> {
        for (file, bytes) in [
            (c"/proc/self/setgroups", &b"deny"[..]),
            (c"/proc/self/uid_map", &self.uid_map[..]),
            (c"/proc/self/gid_map", &self.gid_map[..]),
        ] {
            let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
            let error = std::io::Error::last_os_error();
            libc::close(fd);
            if written != bytes.len() as isize {
                return Err(error);
            }
        }
        Ok(())
    }
}

/// Makes `command` enter `isolation` before it execs, as `uid`/`gid` (the process's own).
fn isolate(
    command: &mut std::process::Command,
    isolation: &Isolation,
    uid: u32,
    gid: u32,
) -> Result<()> {
    let plan = Plan::new(isolation, uid, gid)?;
    use std::os::unix::process::CommandExt;
    // SAFETY: `enter` only makes system calls on memory prepared before the fork.
    unsafe {
        command.pre_exec(move || plan.enter());
    }
    Ok(())
}

/// Whether processes can be isolated here: `Ok(how)`, or why not. Probed once per process by
/// isolating `/bin/true` over scratch folders.
pub fn available() -> &'static Result<&'static str, String> {
    static AVAILABLE: OnceLock<Result<&'static str, String>> = OnceLock::new();
    AVAILABLE.get_or_init(|| {
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        probe(uid, gid).map(|()| {
            if uid == 0 {
                "a mount namespace (root), locked in a user namespace"
            } else {
                "a user and mount namespace mapping the harness's own uid"
            }
        })
    })
}

/// Isolate `/bin/true` as `uid`/`gid` over scratch folders; why not, if it fails.
fn probe(uid: u32, gid: u32) -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("a scratch folder: {e}"))?;
    let own = scratch.path().join("own");
    std::fs::create_dir(&own).map_err(|e| e.to_string())?;
    if uid != nix::unistd::geteuid().as_raw() {
        // The mounts are made after the switch to `uid`, which must reach the folders (a
        // temporary folder is private to its creator).
        for path in [scratch.path(), own.as_path()] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .map_err(|e| format!("handing {} to uid {uid}: {e}", path.display()))?;
        }
    }
    let isolation = Isolation {
        read_only: vec![scratch.path().to_path_buf()],
        writable: vec![own],
        read_only_files: Vec::new(),
    };
    let mut command = std::process::Command::new("/bin/true");
    if uid != nix::unistd::geteuid().as_raw() {
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(gid);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    isolate(&mut command, &isolation, uid, gid).map_err(|e| format!("{e:#}"))?;
    let mut child = command
        .spawn()
        .map_err(|e| format!("entering the namespaces: {e}"))?;
    match crate::system::wait_bounded(&mut child, std::time::Duration::from_secs(10)) {
        Ok(Some(status)) if status.success() => Ok(()),
        Ok(Some(status)) => Err(format!("the probe ended {status}")),
        Ok(None) => Err("the probe did not end within 10 s".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// A launcher whose processes run isolated (see the module): the driver's on `local`.
pub struct IsolatedLauncher {
    inner: Arc<dyn Launcher>,
    isolation: Isolation,
}

impl IsolatedLauncher {
    pub fn new(inner: Arc<dyn Launcher>, isolation: Isolation) -> Self {
        Self { inner, isolation }
    }
}

impl Launcher for IsolatedLauncher {
    fn environment(&self) -> &str {
        self.inner.environment()
    }

    fn cannot_start(&self, program: &Path) -> Option<String> {
        self.inner.cannot_start(program)
    }

    fn prepare(&self, spec: &ProcessSpec) -> Result<PreparedCommand> {
        let mut prepared = self.inner.prepare(spec)?;
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        let plan = Plan::new(&self.isolation, uid, gid)?;
        // SAFETY: as in `isolate`. Added after the inner launcher's own steps (joining the
        // cell's cgroup happens in the harness's namespaces).
        unsafe {
            prepared.command.pre_exec(move || plan.enter());
        }
        Ok(prepared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `script` isolated as `uid`/`gid` over `evidence/` (read-only) with `evidence/own/`
    /// writable and `evidence/own/task.json` read-only; its stdout.
    fn run_isolated(root: &Path, uid: u32, gid: u32, script: &str) -> String {
        let evidence = root.join("evidence");
        let isolation = Isolation {
            read_only: vec![evidence.clone()],
            writable: vec![evidence.join("own")],
            read_only_files: vec![evidence.join("own/task.json")],
        };
        let mut command = std::process::Command::new("/bin/sh");
        command.args(["-c", script]).current_dir(root);
        use std::os::unix::process::CommandExt;
        command.uid(uid).gid(gid);
        isolate(&mut command, &isolation, uid, gid).unwrap();
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    }

    const ATTACK: &str = "
        echo forged > evidence/transcript.jsonl 2>/dev/null && echo evidence-written
        echo mine > evidence/own/workspace-file && echo own-written
        echo forged > evidence/own/task.json 2>/dev/null && echo task-written
        umount evidence 2>/dev/null && echo unmounted
        umount -l evidence/own 2>/dev/null && echo own-unmounted
        mount -o remount,bind,rw evidence 2>/dev/null && echo remounted
        echo forged > evidence/transcript.jsonl 2>/dev/null && echo evidence-written-late
        ls /proc/1/root/ >/dev/null 2>&1 && echo host-root-reached
        id -u
    ";

    fn folders(owner: Option<u32>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("evidence/own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(root.path().join("evidence/transcript.jsonl"), "recorded\n").unwrap();
        std::fs::write(own.join("task.json"), "{}").unwrap();
        if let Some(uid) = owner {
            for path in [
                root.path(),
                &root.path().join("evidence"),
                &own,
                &own.join("task.json"),
            ] {
                std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
            }
            std::os::unix::fs::chown(
                root.path().join("evidence/transcript.jsonl"),
                Some(uid),
                Some(uid),
            )
            .unwrap();
        }
        root
    }

    fn assert_only_its_own_part_is_written(root: &Path, said: &str, uid: u32) {
        assert_eq!(
            said,
            format!("own-written\n{uid}\n"),
            "what the isolated process managed"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("evidence/transcript.jsonl")).unwrap(),
            "recorded\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("evidence/own/task.json")).unwrap(),
            "{}"
        );
    }

    /// Loud, and a failure where every prerequisite must be there.
    fn ignored(why: &str) {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI=true: {why}");
        eprintln!("ignored: {why}");
    }

    #[test]
    fn an_isolated_root_process_writes_its_own_part_and_cannot_undo_the_read_only_evidence_needs_root(
    ) {
        if !nix::unistd::geteuid().is_root() {
            return ignored("needs root");
        }
        let root = folders(None);
        let said = run_isolated(root.path(), 0, 0, ATTACK);
        assert_only_its_own_part_is_written(root.path(), &said, 0);
    }

    /// The unprivileged path, as an unprivileged uid (set by root before the isolation, as a
    /// harness started by that user would be).
    #[test]
    fn an_isolated_unprivileged_process_is_held_the_same_way_needs_root() {
        if !nix::unistd::geteuid().is_root() {
            return ignored("needs root (to become another uid)");
        }
        if let Err(why) = probe(65534, 65534) {
            return ignored(&format!("no unprivileged user namespaces here: {why}"));
        }
        let root = folders(Some(65534));
        let said = run_isolated(root.path(), 65534, 65534, ATTACK);
        assert_only_its_own_part_is_written(root.path(), &said, 65534);
    }
}
