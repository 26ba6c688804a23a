//! What ends or signals one launch's app-server, shared by its relays and its waiter.

use std::sync::Mutex;

/// Kills or signals one app-server, never after it was reaped (its pid could be another
/// process's by then): the waiter marks it exited, under the same lock, before reaping it.
pub(super) struct Killer {
    pid: i32,
    state: Mutex<KillState>,
}

#[derive(Default)]
struct KillState {
    exited: bool,
    killed_by: Option<String>,
}

impl Killer {
    pub(super) fn new(pid: i32) -> Self {
        Self {
            pid,
            state: Mutex::new(KillState::default()),
        }
    }

    pub(super) fn kill(&self, why: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.exited {
            return;
        }
        state.killed_by.get_or_insert_with(|| why.to_string());
        // The app-server leads its own process group: what it started goes with it.
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
    }

    pub(super) fn signal(&self, signal: i32) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.exited {
            // SAFETY: as above.
            unsafe {
                libc::kill(self.pid, signal);
            }
        }
    }

    pub(super) fn exited(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).exited = true;
    }

    pub(super) fn killed_by(&self) -> Option<String> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .killed_by
            .clone()
    }
}
