//! The tap's wire to the harness: one Unix stream socket per launch, carrying frames both ways.
//! A frame is a kind byte, its payload's length (u32, big-endian) and the payload.
//!
//! Driver side → harness: [`Kind::Hello`] first (the driver's argv, the names of its
//! environment, its working folder, the tap's pid), sent with the tap's stdin and stdout
//! attached ([`send_with_fds`]: the harness reads and writes the driver's own pipes, so a
//! round trip pays no hop through the tap), then `stdin-eof` (every writer of the tap's stdin
//! let go of it) and a signal the tap was sent. Harness → driver
//! side: `stderr` bytes, `stdout-eof` (the app-server closed its stdout) and the exit.
//!
//! Written by hand: a five-byte header between two ends that both live in this crate; a codec
//! crate would bring an async runtime into the tap, whose whole job is to stay out of the way.

use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The largest payload a frame may carry: bytes travel in chunks of [`crate::CHUNK`], and the
/// hello (argv and environment names) fits with room to spare.
pub(crate) const MAX_PAYLOAD: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Hello = 1,
    /// The tap saw its stdin hang up: no process holds a writing end any more.
    StdinEof = 3,
    /// Payload: the signal number, i32 big-endian.
    Signal = 4,
    Stderr = 17,
    StdoutEof = 18,
    /// Payload: [`ExitFrame`] as JSON.
    Exit = 19,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            3 => Kind::StdinEof,
            4 => Kind::Signal,
            17 => Kind::Stderr,
            18 => Kind::StdoutEof,
            19 => Kind::Exit,
            _ => return None,
        })
    }
}

/// The first frame of a launch: what the driver ran `codex` with. Environment values never
/// leave the tap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub argv: Vec<String>,
    pub env_names: Vec<String>,
    pub cwd: String,
    pub pid: u32,
}

/// How the app-server ended (`error`: it could not be started or waited for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExitFrame {
    pub status: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
}

/// Writes frames, each with one `write` (header and payload in one buffer) so the two ends see
/// each chunk as soon as it is complete.
pub(crate) struct Writer<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(crate::CHUNK + 5),
        }
    }

    pub(crate) fn send(&mut self, kind: Kind, payload: &[u8]) -> io::Result<()> {
        if payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a frame of {} bytes (most: {MAX_PAYLOAD})", payload.len()),
            ));
        }
        self.buf.clear();
        self.buf.push(kind as u8);
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_be_bytes());
        self.buf.extend_from_slice(payload);
        self.inner.write_all(&self.buf)
    }
}

/// Read the next frame's kind into `payload`; `None` at a clean end of the stream (between
/// frames). An unknown kind or an oversized payload is an error: the other end is not a tap.
pub(crate) fn read(from: &mut impl Read, payload: &mut Vec<u8>) -> io::Result<Option<Kind>> {
    let mut header = [0u8; 5];
    let mut got = 0;
    while got < header.len() {
        match from.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let kind = Kind::from_byte(header[0]).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown frame kind {}", header[0]),
        )
    })?;
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (most: {MAX_PAYLOAD})"),
        ));
    }
    payload.clear();
    payload.resize(len, 0);
    from.read_exact(payload)?;
    Ok(Some(kind))
}

fn encode(kind: Kind, payload: &[u8]) -> io::Result<Vec<u8>> {
    if payload.len() > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a frame of {} bytes (most: {MAX_PAYLOAD})", payload.len()),
        ));
    }
    let mut buf = Vec::with_capacity(payload.len() + 5);
    buf.push(kind as u8);
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(payload);
    Ok(buf)
}

/// Send one frame on `stream` with `fds` attached (SCM_RIGHTS, on the frame's first byte).
pub(crate) fn send_with_fds(
    stream: &UnixStream,
    kind: Kind,
    payload: &[u8],
    fds: &[BorrowedFd],
) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let buf = encode(kind, payload)?;
    let raw: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let sent = loop {
        match sendmsg::<()>(
            stream.as_raw_fd(),
            &[IoSlice::new(&buf)],
            &[ControlMessage::ScmRights(&raw)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(sent) => break sent,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    (&*stream).write_all(&buf[sent..])
}

/// Read the first byte of the next frame from `stream`, with the descriptors attached to it
/// (at most two, as the tap sends; any beyond are closed by the kernel). `None` at the end of
/// the stream. The descriptors arrive close-on-exec, so nothing the harness starts inherits
/// them.
pub(crate) fn recv_first_byte_with_fds(
    stream: &UnixStream,
) -> io::Result<Option<(u8, Vec<OwnedFd>)>> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let (bytes, fds) = loop {
        let mut iov = [IoSliceMut::new(&mut byte)];
        match recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for cmsg in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(received) = cmsg {
                        // SAFETY: the kernel just installed these descriptors in this process;
                        // nothing else owns them.
                        fds.extend(
                            received
                                .into_iter()
                                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                        );
                    }
                }
                break (msg.bytes, fds);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if bytes == 0 {
        return Ok(None);
    }
    Ok(Some((byte[0], fds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_is_refused() {
        let mut bytes = Vec::new();
        let mut writer = Writer::new(&mut bytes);
        writer.send(Kind::Stderr, b"warning\n").unwrap();
        writer.send(Kind::StdoutEof, b"").unwrap();
        let mut reader = &bytes[..];
        let mut payload = Vec::new();
        assert_eq!(read(&mut reader, &mut payload).unwrap(), Some(Kind::Stderr));
        assert_eq!(payload, b"warning\n");
        assert_eq!(
            read(&mut reader, &mut payload).unwrap(),
            Some(Kind::StdoutEof)
        );
        assert!(payload.is_empty());
        assert_eq!(read(&mut reader, &mut payload).unwrap(), None);

        let mut unknown = &[9u8, 0, 0, 0, 0][..];
        assert!(read(&mut unknown, &mut payload).is_err());
        let mut huge = &[2u8, 0xff, 0xff, 0xff, 0xff][..];
        assert!(read(&mut huge, &mut payload).is_err());
        let mut cut = &[17u8, 0, 0][..];
        assert!(read(&mut cut, &mut payload).is_err(), "a frame cut short");
    }

    #[test]
    fn a_frame_carries_descriptors_that_reach_the_same_pipe() {
        use std::os::fd::AsFd;
        let (tap, harness) = UnixStream::pair().unwrap();
        let (pipe_read, pipe_write) = nix::unistd::pipe().unwrap();
        send_with_fds(&tap, Kind::Hello, b"{}", &[pipe_write.as_fd()]).unwrap();
        drop(pipe_write);
        let (first, fds) = recv_first_byte_with_fds(&harness).unwrap().unwrap();
        assert_eq!(first, Kind::Hello as u8);
        assert_eq!(fds.len(), 1);
        let flags = nix::fcntl::fcntl(&fds[0], nix::fcntl::FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "received close-on-exec");
        // The rest of the frame follows as plain bytes.
        let mut rest = [0u8; 6];
        (&harness).read_exact(&mut rest).unwrap();
        assert_eq!(rest, [0, 0, 0, 2, b'{', b'}']);
        // Writing through the received descriptor reaches the sender's pipe.
        let mut out = std::fs::File::from(fds.into_iter().next().unwrap());
        out.write_all(b"line\n").unwrap();
        drop(out);
        let mut got = String::new();
        std::fs::File::from(pipe_read)
            .read_to_string(&mut got)
            .unwrap();
        assert_eq!(got, "line\n");
        drop(tap);
        assert!(recv_first_byte_with_fds(&harness).unwrap().is_none());
    }
}
