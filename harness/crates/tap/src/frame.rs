//! The tap's wire to the harness: one Unix stream socket per launch, carrying frames both ways.
//! A frame is a kind byte, its payload's length (u32, big-endian) and the payload.
//!
//! Driver side → harness: [`Kind::Hello`] first (the driver's argv, the names of its
//! environment, its working folder, the tap's pid), then `stdin` bytes, `stdin-eof`, a signal
//! the tap was sent, and `stdout-gone` (the driver stopped reading). Harness → driver side:
//! `stdout` and `stderr` bytes, `stdout-eof` (the app-server closed its stdout) and the exit.
//!
//! Written by hand: a five-byte header between two ends that both live in this crate; a codec
//! crate would bring an async runtime into the tap, whose whole job is to stay out of the way.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// The largest payload a frame may carry: bytes travel in chunks of [`crate::CHUNK`], and the
/// hello (argv and environment names) fits with room to spare.
pub const MAX_PAYLOAD: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Hello = 1,
    Stdin = 2,
    StdinEof = 3,
    /// Payload: the signal number, i32 big-endian.
    Signal = 4,
    StdoutGone = 5,
    Stdout = 16,
    Stderr = 17,
    StdoutEof = 18,
    /// Payload: [`ExitFrame`] as JSON.
    Exit = 19,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            2 => Kind::Stdin,
            3 => Kind::StdinEof,
            4 => Kind::Signal,
            5 => Kind::StdoutGone,
            16 => Kind::Stdout,
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
pub struct Hello {
    pub argv: Vec<String>,
    pub env_names: Vec<String>,
    pub cwd: String,
    pub pid: u32,
}

/// How the app-server ended (`error`: it could not be started or waited for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitFrame {
    pub status: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
}

/// Writes frames, each with one `write` (header and payload in one buffer) so the two ends see
/// each chunk as soon as it is complete.
pub struct Writer<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            buf: Vec::with_capacity(crate::CHUNK + 5),
        }
    }

    pub fn send(&mut self, kind: Kind, payload: &[u8]) -> io::Result<()> {
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

    pub fn get_ref(&self) -> &W {
        &self.inner
    }
}

/// Read the next frame's kind into `payload`; `None` at a clean end of the stream (between
/// frames). An unknown kind or an oversized payload is an error: the other end is not a tap.
pub fn read(from: &mut impl Read, payload: &mut Vec<u8>) -> io::Result<Option<Kind>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_is_refused() {
        let mut bytes = Vec::new();
        let mut writer = Writer::new(&mut bytes);
        writer.send(Kind::Stdin, b"{\"id\":1}\n").unwrap();
        writer.send(Kind::StdinEof, b"").unwrap();
        let mut reader = &bytes[..];
        let mut payload = Vec::new();
        assert_eq!(read(&mut reader, &mut payload).unwrap(), Some(Kind::Stdin));
        assert_eq!(payload, b"{\"id\":1}\n");
        assert_eq!(
            read(&mut reader, &mut payload).unwrap(),
            Some(Kind::StdinEof)
        );
        assert!(payload.is_empty());
        assert_eq!(read(&mut reader, &mut payload).unwrap(), None);

        let mut unknown = &[9u8, 0, 0, 0, 0][..];
        assert!(read(&mut unknown, &mut payload).is_err());
        let mut huge = &[2u8, 0xff, 0xff, 0xff, 0xff][..];
        assert!(read(&mut huge, &mut payload).is_err());
        let mut cut = &[2u8, 0, 0][..];
        assert!(read(&mut cut, &mut payload).is_err(), "a frame cut short");
    }
}
