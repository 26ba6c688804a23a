//! A process on the host (`local`) given no more power than an unprivileged user's: the driver
//! under test runs this way, so it can neither rewrite the evidence it is graded from nor leave
//! its cell.
//!
//! What the process sees is a view of the host, made between fork and exec:
//! - **a mount namespace** where some folders are hidden behind an empty tmpfs (the output
//!   folder, so other cells and runs are absent; a folder the process's uid cannot enter),
//!   some are private, empty and bounded (`/tmp`, `/var/tmp`, `/dev/shm`: nothing it leaves
//!   there outlives it), and some appear at their own paths again on top of those, writable
//!   (its own part of the cell folder) or read-only (its task, the tap, its program and what
//!   its command names);
//! - **a cgroup namespace** rooted at the cell's cgroup (joined before this step), so no
//!   ancestor's `cgroup.procs` is reachable: a process cannot move itself out of the cell;
//! - **a network namespace** with only its own loopback: no service of the host's or of another
//!   cell's (a real-Codex cell's mock model API, an abstract socket) is in reach; the tap is a
//!   socket file, reached through the view;
//! - **an unprivileged uid**: a root harness switches the process to a uid and gid of its own
//!   ([`DriverIds`]) with no supplementary groups and `no_new_privs`, so the harness binary, the
//!   cache, other runs' folders and root-only files are what they are to any user; the mounts
//!   were made by root, so that uid can undo none of them. A harness that is not root keeps its
//!   own uid: the view is made in a user namespace of its own, then a further user namespace
//!   locks the mounts (made in a more privileged namespace, they can be neither unmounted nor
//!   remounted writable), and what the view shows read-only stays so.
//!
//! The mounts use the kernel's mount API (`open_tree`, `move_mount`, `mount_setattr`, Linux
//! 5.12): each folder that must appear again is cloned before anything hides it, so a clone of a
//! folder below a hidden one needs no path through it. nix wraps none of these calls.
//!
//! Where the kernel allows none of this, [`available`] says why and the caller falls back to
//! what docs/prerequisites.md describes.

use crate::launcher::{Launcher, PreparedCommand, ProcessSpec};
use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

mod syscalls;
mod view;
use syscalls::{
    check, check_long, cover, loopback_up, place, seal, MountAttr, AT_RECURSIVE, MOUNT_ATTR_RDONLY,
    OPEN_TREE_CLONE,
};
use view::{mount_steps, Folders, Step, Tree};

/// The folders every isolated process gets private: empty at its start, gone with it.
const PRIVATE_FOLDERS: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// [`PRIVATE_FOLDERS`] as paths, for [`Isolation::private`].
pub fn private_folders() -> Vec<PathBuf> {
    PRIVATE_FOLDERS.iter().map(PathBuf::from).collect()
}

/// The bound on each private folder's tmpfs (memory a process could otherwise fill).
const PRIVATE_SIZE: &str = "512m";

/// The uid and gid a root harness runs one cell's local driver as: the pair is the cell's own
/// (drawn at random from a range no system or login account uses), so drivers of cells running
/// at once cannot signal, trace or write each other either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverIds {
    pub uid: u32,
    pub gid: u32,
}

impl DriverIds {
    /// The first id of the range (about 1.5 billion; the range is 2^24 wide).
    pub const BASE: u32 = 0x5a00_0000;

    /// A fresh pair for one cell.
    pub fn fresh() -> DriverIds {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static DRAWN: AtomicU64 = AtomicU64::new(0);
        // std's hasher keys are random per process: a pid and a counter hashed with them are
        // as good as a random number here, without a dependency for one.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u64(DRAWN.fetch_add(1, Ordering::Relaxed));
        let id = Self::BASE + (hasher.finish() as u32 & 0x00ff_ffff);
        DriverIds { uid: id, gid: id }
    }

    /// Make `folders` (and what they already hold) the driver's to write, while they stay
    /// root's: group `gid`, group-writable, new entries inheriting the group (setgid). The
    /// owner stays the harness's, as Git and the app-server (run as root) expect of a workspace.
    pub fn open_to_driver(&self, folders: &[&Path]) -> Result<()> {
        for folder in folders {
            open_tree_to(folder, self.gid)
                .with_context(|| format!("handing {} to gid {}", folder.display(), self.gid))?;
        }
        Ok(())
    }
}

fn open_tree_to(path: &Path, gid: u32) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, None, Some(gid))?;
    let mode = meta.permissions().mode() & 0o7777;
    if meta.is_dir() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o2070))?;
        for entry in std::fs::read_dir(path)? {
            open_tree_to(&entry?.path(), gid)?;
        }
    } else {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o060))?;
    }
    Ok(())
}

/// What the process sees (see the module). Paths are the host's; each appears at its own path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Folders hidden behind an empty tmpfs: what is listed below one appears again.
    pub hidden: Vec<PathBuf>,
    /// Folders replaced by a private, empty, bounded tmpfs anyone may write (sticky), e.g.
    /// [`PRIVATE_FOLDERS`].
    pub private: Vec<PathBuf>,
    /// Folders and files that appear at their own path, writable as they are on the host.
    pub writable: Vec<PathBuf>,
    /// Folders and files that appear at their own path read-only.
    pub read_only: Vec<PathBuf>,
    /// Whom a root harness runs the process as; ignored when the harness is not root (it keeps
    /// its own uid).
    pub run_as: Option<DriverIds>,
    /// Keep the host's network (its loopback, where a real-Codex cell's mock model API
    /// listens) rather than a namespace of its own: for the app-server, never the driver.
    pub host_network: bool,
    /// Files shown read-only in another file's place, `(what, where)`: an `/etc/passwd` that
    /// names the uid it runs as, as a developer's machine would.
    pub replaced: Vec<(PathBuf, PathBuf)>,
}

impl Isolation {
    /// Every path that appears at its own path.
    fn visible(&self) -> impl Iterator<Item = &PathBuf> {
        self.writable.iter().chain(self.read_only.iter())
    }
}

/// Everything the child needs, prepared before the fork: no allocation happens after it.
struct Plan {
    /// Whether the harness is root (else the view is made in a user namespace of its own).
    privileged: bool,
    /// Cloned before anything is hidden: each path, and whether the clone is made read-only.
    trees: Vec<Tree>,
    tree_fds: Vec<libc::c_int>,
    steps: Vec<Step>,
    run_as: Option<DriverIds>,
    host_network: bool,
    /// The harness's own uid and gid mapped onto themselves (the user namespaces of a harness
    /// that is not root, and the lock).
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Entered again at the end: the working folder std entered before this ran is the one
    /// under the view's covers.
    cwd: Option<CString>,
}

/// The uid and gid this process runs as.
fn harness_ids() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", path.display()))
}

impl Plan {
    /// The plan for a process started by a harness running as `harness` (uid, gid).
    fn new(isolation: &Isolation, cwd: Option<&Path>, harness: (u32, u32)) -> Result<Plan> {
        let (uid, gid) = harness;
        let privileged = uid == 0;
        let run_as = isolation.run_as.filter(|_| privileged);
        let folders = Folders::of(isolation, run_as);
        let (trees, steps) = mount_steps(&folders, &isolation.replaced)?;
        Ok(Plan {
            privileged,
            tree_fds: vec![-1; trees.len()],
            trees,
            steps,
            run_as,
            host_network: isolation.host_network,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            // As the kernel resolves it, as the view's paths are: a `..` through a folder the
            // view does not show (`repo/harness/../drivers`) would not resolve there.
            cwd: cwd
                .map(|cwd| std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf()))
                .as_deref()
                .map(c_path)
                .transpose()?,
        })
    }

    /// Between fork and exec: system calls only, on memory prepared before the fork.
    fn enter(&mut self) -> std::io::Result<()> {
        // SAFETY: plain system calls on strings and buffers prepared before the fork.
        unsafe {
            let network = if self.host_network {
                0
            } else {
                libc::CLONE_NEWNET
            };
            let namespaces = libc::CLONE_NEWNS | libc::CLONE_NEWCGROUP | network;
            if self.privileged {
                check(libc::unshare(namespaces))?;
            } else {
                check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
                check(libc::unshare(libc::CLONE_NEWUSER | namespaces))?;
                self.write_maps()?;
            }
            if !self.host_network {
                loopback_up()?;
            }
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            self.clone_trees()?;
            for step in &self.steps {
                match step {
                    Step::Cover {
                        path,
                        ancestors,
                        options,
                        ..
                    } => cover(path, ancestors, options)?,
                    Step::Place {
                        tree,
                        path,
                        ancestors,
                        file,
                    } => place(self.tree_fds[*tree], path, ancestors, *file)?,
                }
            }
            for fd in &self.tree_fds {
                libc::close(*fd);
            }
            // The deepest first: a sealed folder's path may lie below another's.
            for step in self.steps.iter().rev() {
                if let Step::Cover {
                    path, seal: true, ..
                } = step
                {
                    seal(path)?;
                }
            }
            match self.run_as {
                Some(ids) => {
                    check(libc::setgroups(0, std::ptr::null()))?;
                    check(libc::setresgid(ids.gid, ids.gid, ids.gid))?;
                    check(libc::setresuid(ids.uid, ids.uid, ids.uid))?;
                    // A process whose uid was just changed is not dumpable; its /proc/self
                    // files would then be root's, not its own.
                    check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0))?;
                    // A local cell's driver and its app-server are two uids of one group (on a
                    // developer's machine, one user): what either makes in the shared folders
                    // stays writable by the other (a CODEX_HOME or a file the driver made
                    // before its turn), as one user's files are to that user.
                    libc::umask(0o002);
                }
                None => {
                    // Lock the mounts: from here on they came from a more privileged namespace.
                    check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                    self.write_maps()?;
                }
            }
            // No set-uid program gives back what was taken.
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            if let Some(cwd) = &self.cwd {
                check(libc::chdir(cwd.as_ptr()))?;
            }
        }
        Ok(())
    }

    /// Clone every tree that appears again, before anything hides its path.
    unsafe fn clone_trees(&mut self) -> std::io::Result<()> {
        for (index, (path, read_only)) in self.trees.iter().enumerate() {
            let fd = libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                path.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            self.tree_fds[index] = fd as libc::c_int;
            if *read_only {
                let attr = MountAttr {
                    attr_set: MOUNT_ATTR_RDONLY,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                check_long(libc::syscall(
                    libc::SYS_mount_setattr,
                    fd as libc::c_int,
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                    &attr as *const MountAttr,
                    std::mem::size_of::<MountAttr>(),
                ))?;
            }
        }
        Ok(())
    }

    /// Map the harness's own uid and gid in its new user namespace (`setgroups` denied first,
    /// as an unprivileged gid map requires).
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

/// Makes `command` enter `isolation` before it execs (after the steps added before this one,
/// such as joining the cell's cgroup, which happen in the harness's namespaces).
fn isolate(
    command: &mut std::process::Command,
    isolation: &Isolation,
    cwd: Option<&Path>,
    harness: (u32, u32),
) -> Result<()> {
    let mut plan = Plan::new(isolation, cwd, harness)?;
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
        probe().map(|()| {
            if nix::unistd::geteuid().is_root() {
                "a mount and cgroup namespace and a uid of the cell's own (root)"
            } else {
                "a user, mount and cgroup namespace mapping the harness's own uid"
            }
        })
    })
}

/// Isolate `/bin/true` over scratch folders as a driver would be; why not, if it fails.
fn probe() -> Result<(), String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("a scratch folder: {e}"))?;
    let own = scratch.path().join("own");
    std::fs::create_dir(&own).map_err(|e| e.to_string())?;
    let isolation = Isolation {
        hidden: vec![scratch.path().to_path_buf()],
        private: private_folders(),
        writable: vec![own.clone()],
        read_only: Vec::new(),
        run_as: Some(DriverIds::fresh()),
        host_network: false,
        replaced: Vec::new(),
    };
    let mut command = std::process::Command::new("/bin/true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    isolate(&mut command, &isolation, Some(&own), harness_ids()).map_err(|e| format!("{e:#}"))?;
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
        let ids = self
            .isolation
            .run_as
            .filter(|_| nix::unistd::geteuid().is_root());
        match ids {
            Some(ids) => {
                let visible: Vec<PathBuf> = self.isolation.visible().cloned().collect();
                crate::reachable::unreachable_program(program, ids.uid, &visible)
            }
            None => self.inner.cannot_start(program),
        }
    }

    fn prepare(&self, spec: &ProcessSpec) -> Result<PreparedCommand> {
        let mut prepared = self.inner.prepare(spec)?;
        let mut plan = Plan::new(&self.isolation, Some(&spec.cwd), harness_ids())?;
        // SAFETY: as in `isolate`. Added after the inner launcher's own steps (joining the
        // cell's cgroup happens in the harness's namespaces).
        unsafe {
            prepared.command.pre_exec(move || plan.enter());
        }
        Ok(prepared)
    }
}

#[cfg(test)]
mod tests;
