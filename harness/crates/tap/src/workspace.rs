//! What happened to the workspace, from the kernel: an inotify watch the harness holds on the
//! cell's workspace for the whole run (recursive, each new folder watched as it appears). Every
//! create, write, close-after-write, rename and removal is a line of `workspace-changes.jsonl`
//! with its time, up to [`MAX_RECORDS`] (then one line saying the budget is spent); a kernel
//! queue overflow is a line too. The driver's and the app-server's processes write the
//! workspace through bind mounts of the same folder, so the watch sees writes made inside a
//! container as well.
//!
//! The one thing a recursive inotify watch cannot see: a file made and removed again inside a
//! folder in the moment between that folder's creation and its own watch. The workspace itself
//! is watched from before the driver starts, so nothing directly in it (where the probes are)
//! is missed; a workspace folder that is itself moved away or removed (another put in its place
//! would not be watched) is said ([`Changes::workspace_lost`]). A folder below it that cannot be watched (nested past `PATH_MAX`, the user's
//! watches spent) is a line of its own and makes the changes incomplete; the watch on the rest
//! goes on.
//!
//! What it gives the grader: the name of every file that existed at some moment
//! ([`Changes::appeared`]), so a probe that was written and removed again is still a write that
//! succeeded.
//!
//! Built on `nix::sys::inotify` (already a dependency, the workspace enables its `inotify`
//! feature): a thin, maintained binding of the system calls; a file-watching framework (e.g.
//! `notify`) would add debouncing and a backend choice the evidence must not have.

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::io::{PipeReader, PipeWriter, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Lines of `workspace-changes.jsonl` at most, and names remembered as having appeared: a
/// driver that floods the workspace cannot grow the harness's memory or the evidence past it.
pub const MAX_RECORDS: usize = 100_000;

const MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF);

/// What the watch saw, once it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Every path (relative to the workspace) that was created or moved in at some moment.
    pub appeared: BTreeSet<String>,
    /// The kernel's queue overflowed or the record budget was spent: events may be missing.
    pub incomplete: Option<String>,
    /// The workspace folder itself was moved away or removed during the run: whatever was
    /// written at its path afterwards (in a folder put in its place) was not watched.
    pub workspace_lost: Option<String>,
}

#[derive(Serialize)]
struct Record<'a> {
    t_ms: u64,
    event: &'a str,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

/// A running watch; [`WorkspaceWatcher::finish`] ends it (dropped unfinished, as when a cell's
/// attempt fails early, its thread ends on its own).
pub struct WorkspaceWatcher {
    /// Closing it wakes the watching thread to stop at once: the thread waits on the kernel's
    /// queue and this pipe together, never on a timer, so ending a cell's watch costs no poll
    /// interval (a 50 ms one cost every cell 50-100 ms).
    stop: Option<PipeWriter>,
    /// What the watch saw, sent by its thread before it closes the inotify instance: closing
    /// one that has held watches waits for the kernel's fsnotify grace period (measured: 14 ms
    /// of every cell's evidence stage when `finish` joined the thread), which nothing the cell
    /// reports depends on, so the thread finishes it alone. (In a mutex only for `Sync`: a
    /// cell's stages share the watcher across awaits; `finish` takes it whole.)
    seen: std::sync::Mutex<std::sync::mpsc::Receiver<Result<Changes>>>,
    /// Not joined by `finish` (the close is the thread's to wait for); kept for tests.
    #[cfg_attr(not(test), allow(dead_code))]
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Start watching `workspace`, writing the changes into `log`.
pub fn watch(workspace: &Path, log: &Path) -> Result<WorkspaceWatcher> {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
        .context("starting an inotify watch on the workspace")?;
    let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut state = Watch {
        inotify,
        root: workspace.to_path_buf(),
        folders: HashMap::new(),
        out: std::io::BufWriter::new(file),
        records: 0,
        changes: Changes::default(),
    };
    state.add_tree(workspace, "")?;
    let (stopping, stop) = std::io::pipe().context("making the workspace watch's stop pipe")?;
    let (send, seen) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("workspace-watch".into())
        .spawn(move || {
            let changes = state.run(&stopping);
            // The receiver may be gone (the watcher dropped unfinished): nobody waits then.
            let _ = send.send(changes);
            drop(state);
        })
        .context("starting the workspace watcher's thread")?;
    Ok(WorkspaceWatcher {
        stop: Some(stop),
        seen: std::sync::Mutex::new(seen),
        thread: Some(thread),
    })
}

impl WorkspaceWatcher {
    /// Read what is left in the kernel's queue and end the watch. Call it once every process
    /// that could write the workspace has ended.
    pub fn finish(mut self) -> Result<Changes> {
        drop(self.stop.take());
        let seen = self
            .seen
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.recv().map_err(|_| {
            anyhow::anyhow!(
                "the workspace watcher's thread ended without its changes (it panicked)"
            )
        })?
    }
}

struct Watch {
    inotify: Inotify,
    root: PathBuf,
    /// Each watched folder, relative to the workspace ("" for the workspace itself).
    folders: HashMap<WatchDescriptor, String>,
    out: std::io::BufWriter<std::fs::File>,
    records: usize,
    changes: Changes,
}

fn join(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}

impl Watch {
    /// Until the stop pipe's writer is closed (by `finish` or by dropping the watcher). No
    /// timeout: the watcher's owner bounds the cell, and its closing the pipe always wakes this.
    fn run(&mut self, stop: &PipeReader) -> Result<Changes> {
        loop {
            let (changed, stopping) = {
                let mut fds = [
                    PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
                    PollFd::new(stop.as_fd(), PollFlags::POLLIN),
                ];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e).context("waiting for workspace changes"),
                }
                let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                (ready(&fds[0]), ready(&fds[1]))
            };
            if changed || stopping {
                // After the stop too: what the last processes did is already in the queue
                // (events are queued when the change is made), so one read without waiting
                // takes all of it.
                self.drain()?;
            }
            if stopping {
                self.out.flush().context("writing the workspace changes")?;
                return Ok(std::mem::take(&mut self.changes));
            }
        }
    }

    fn drain(&mut self) -> Result<()> {
        loop {
            match self.inotify.read_events() {
                Ok(events) => {
                    for event in events {
                        self.observe(event)?;
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => return Ok(()),
                Err(e) => return Err(e).context("reading workspace changes"),
            }
        }
    }

    fn observe(&mut self, event: InotifyEvent) -> Result<()> {
        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            self.changes.incomplete = Some("the kernel's inotify queue overflowed".into());
            return self.record("overflow", "", Some("the kernel dropped events"));
        }
        let Some(folder) = self.folders.get(&event.wd).cloned() else {
            return Ok(());
        };
        if event.mask.contains(AddWatchFlags::IN_IGNORED) {
            self.folders.remove(&event.wd);
            return Ok(());
        }
        let name = event
            .name
            .as_ref()
            .map(|n| n.to_string_lossy().into_owned());
        let path = match &name {
            Some(name) => join(&folder, name),
            None => folder.clone(),
        };
        let is_dir = event.mask.contains(AddWatchFlags::IN_ISDIR);
        if folder.is_empty()
            && event
                .mask
                .intersects(AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_DELETE_SELF)
        {
            self.changes.workspace_lost.get_or_insert_with(|| {
                "the workspace folder itself was moved away or removed during the run".into()
            });
        }
        let kind = [
            (AddWatchFlags::IN_CREATE, "create"),
            (AddWatchFlags::IN_MOVED_TO, "moved-in"),
            (AddWatchFlags::IN_MOVED_FROM, "moved-out"),
            (AddWatchFlags::IN_CLOSE_WRITE, "close-write"),
            (AddWatchFlags::IN_MODIFY, "modify"),
            (AddWatchFlags::IN_DELETE, "delete"),
            (AddWatchFlags::IN_DELETE_SELF, "folder-deleted"),
            (AddWatchFlags::IN_MOVE_SELF, "folder-moved"),
        ]
        .into_iter()
        .find(|(flag, _)| event.mask.contains(*flag))
        .map_or("other", |(_, kind)| kind);
        if matches!(kind, "create" | "moved-in") {
            self.appeared(&path);
        }
        self.record(kind, &path, is_dir.then_some("a folder"))?;
        if is_dir && matches!(kind, "create" | "moved-in") {
            // What was made inside before the watch was added is found by listing it.
            self.add_tree(&self.root.join(&path), &path)?;
        }
        Ok(())
    }

    fn appeared(&mut self, path: &str) {
        if self.changes.appeared.len() < MAX_RECORDS {
            self.changes.appeared.insert(path.to_string());
        }
    }

    /// Watch `dir` (relative `rel`) and every folder below it; what is already there counts as
    /// having appeared (it was made after the watch on its parent began, or before the run).
    fn add_tree(&mut self, dir: &Path, rel: &str) -> Result<()> {
        let wd = match self.inotify.add_watch(dir, MASK) {
            Ok(wd) => wd,
            // Gone again, or not a folder any more: its own events say so.
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => return Ok(()),
            Err(e) if rel.is_empty() => {
                return Err(e).with_context(|| format!("watching {}", dir.display()))
            }
            // A folder below the workspace that cannot be watched (nested past `PATH_MAX`, out
            // of watches) must not end the watch on the rest: a driver could make one on
            // purpose to blind the watch before it writes a probe directly in the workspace.
            Err(e) => {
                let why = format!("folder `{rel}` could not be watched ({e})");
                self.record("unwatched", rel, Some("changes inside it are not seen"))?;
                self.changes.incomplete.get_or_insert(why);
                return Ok(());
            }
        };
        self.folders.insert(wd, rel.to_string());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = join(rel, &name);
            if !rel.is_empty() {
                self.appeared(&path);
                self.record("found", &path, Some("inside a new folder"))?;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                self.add_tree(&entry.path(), &path)?;
            }
        }
        Ok(())
    }

    fn record(&mut self, event: &str, path: &str, note: Option<&str>) -> Result<()> {
        self.records += 1;
        if self.records > MAX_RECORDS {
            if self.changes.incomplete.is_none() {
                self.changes.incomplete = Some(format!(
                    "more than {MAX_RECORDS} workspace changes: the rest were not recorded"
                ));
                self.write(&Record {
                    t_ms: graders::events::now_ms(),
                    event: "budget-spent",
                    path: "",
                    note: Some("no further changes are recorded"),
                })?;
            }
            return Ok(());
        }
        self.write(&Record {
            t_ms: graders::events::now_ms(),
            event,
            path,
            note,
        })
    }

    fn write(&mut self, record: &Record) -> Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out
            .write_all(b"\n")
            .context("writing the workspace changes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_file_written_and_removed_again_is_seen_to_have_appeared() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("there-before"), "x").unwrap();
        let log = dir.path().join("workspace-changes.jsonl");
        let watcher = watch(&workspace, &log).unwrap();
        std::fs::write(workspace.join("probe"), "written").unwrap();
        std::fs::remove_file(workspace.join("probe")).unwrap();
        std::fs::create_dir_all(workspace.join("a/b")).unwrap();
        std::fs::write(workspace.join("a/b/deep"), "x").unwrap();
        std::fs::rename(workspace.join("a/b/deep"), workspace.join("moved")).unwrap();
        std::fs::remove_file(workspace.join("moved")).unwrap();
        let changes = watcher.finish().unwrap();
        for seen in ["probe", "a", "moved"] {
            assert!(changes.appeared.contains(seen), "{seen}: {changes:?}");
        }
        assert!(!changes.appeared.contains("there-before"), "{changes:?}");
        // `a/b/deep` is not asserted: it was moved away before `a/b` could get its watch (the
        // limit the module says).
        assert_eq!(changes.incomplete, None);
        assert_eq!(changes.workspace_lost, None);
        let lines = std::fs::read_to_string(&log).unwrap();
        for needle in [
            r#""event":"create","path":"probe""#,
            r#""event":"delete","path":"probe""#,
            r#""event":"moved-in","path":"moved""#,
        ] {
            assert!(lines.contains(needle), "{needle} in {lines}");
        }
    }

    #[test]
    fn a_folder_nested_past_path_max_does_not_end_the_watch_on_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let log = dir.path().join("workspace-changes.jsonl");
        let watcher = watch(&workspace, &log).unwrap();
        // 20 levels of 250 bytes: made one relative step at a time, as no path to the deepest
        // can be named in one call.
        let name = "d".repeat(250);
        let mut folder = std::fs::File::open(&workspace).unwrap();
        for _ in 0..20 {
            nix::sys::stat::mkdirat(&folder, name.as_str(), nix::sys::stat::Mode::S_IRWXU).unwrap();
            folder = std::fs::File::from(
                nix::fcntl::openat(
                    &folder,
                    name.as_str(),
                    nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_RDONLY,
                    nix::sys::stat::Mode::empty(),
                )
                .unwrap(),
            );
        }
        // Let the watch reach (and fail on) the deepest folders before the probe.
        std::thread::sleep(Duration::from_millis(500));
        std::fs::write(workspace.join("probe"), "written").unwrap();
        std::fs::remove_file(workspace.join("probe")).unwrap();
        let changes = watcher.finish().unwrap();
        assert!(changes.appeared.contains("probe"), "{changes:?}");
        let incomplete = changes.incomplete.expect("the unwatched folder is said");
        assert!(incomplete.contains("could not be watched"), "{incomplete}");
    }

    #[test]
    fn a_workspace_moved_away_and_replaced_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        let watcher = watch(&workspace, &dir.path().join("changes.jsonl")).unwrap();
        std::fs::rename(&workspace, dir.path().join("away")).unwrap();
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("probe"), "written").unwrap();
        std::fs::remove_file(workspace.join("probe")).unwrap();
        let changes = watcher.finish().unwrap();
        assert!(changes.workspace_lost.is_some(), "{changes:?}");
    }

    #[test]
    fn a_watch_dropped_unfinished_ends_its_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut watcher = watch(dir.path(), &dir.path().join("changes.jsonl")).unwrap();
        let thread = watcher.thread.take().unwrap();
        drop(watcher);
        // Bounded: a thread left waiting fails the test instead of hanging it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !thread.is_finished() {
            assert!(Instant::now() < deadline, "the thread still waits");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(thread.join().is_ok());
    }
}
