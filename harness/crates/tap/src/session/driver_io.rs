//! The driver's own stdin and stdout, handed over by its tap (SCM_RIGHTS): the recorder reads
//! the one and writes the other directly, so the relay process is out of the round trip.
//!
//! The descriptors' file status flags are shared with the driver (a driver may have made its end
//! non-blocking), and the driver's pipe may stop being read while the cell ends: so every wait
//! here is a `poll` that can be given up (`cancel`), never a read or write that could block
//! forever, and `EAGAIN` only means "wait for readiness".

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// How often a write waiting for the driver to read checks whether it was given up.
const CANCEL_CHECK_MS: u16 = 100;
/// The most written after one readiness report: a pipe reporting room for a write takes a
/// write of up to PIPE_BUF bytes without blocking.
const SLICE: usize = libc::PIPE_BUF;

/// The driver's stdout, as the recorder writes the app-server's output to it.
pub(super) struct DriverOut {
    fd: OwnedFd,
}

impl DriverOut {
    pub(super) fn new(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// Write all of `bytes`, waiting for the driver to read as a pipe would. An error when the
    /// driver's end is gone (`EPIPE`) or when `cancel` was set while waiting.
    pub(super) fn write_all(&self, mut bytes: &[u8], cancel: &AtomicBool) -> io::Result<()> {
        while !bytes.is_empty() {
            wait_for(&self.fd, PollFlags::POLLOUT, cancel)?;
            let slice = &bytes[..bytes.len().min(SLICE)];
            match nix::unistd::write(&self.fd, slice) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Read the driver's stdin into `buf` once `poll` said it is readable: `Ok(0)` at its end;
/// `WouldBlock` when there was nothing after all (a signal, or another reader of the same pipe).
pub(super) fn read_ready(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    match nix::unistd::read(fd, buf) {
        Ok(n) => Ok(n),
        Err(Errno::EINTR | Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
        Err(e) => Err(e.into()),
    }
}

/// Wait until `fd` is ready for `events` (or reports an error or hang-up, which the next call
/// on it reports), checking `cancel` every [`CANCEL_CHECK_MS`].
fn wait_for(fd: &OwnedFd, events: PollFlags, cancel: &AtomicBool) -> io::Result<()> {
    loop {
        if cancel.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "the tap's connection ended",
            ));
        }
        let mut fds = [PollFd::new(fd.as_fd(), events)];
        match poll(&mut fds, PollTimeout::from(CANCEL_CHECK_MS)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}
