//! Cuts a relayed stream into lines, for the relays that look into them (a mutated cell's,
//! [`super::mutate`], and one with a transport timing, [`super::timed`]).

use graders::wire::transcript::MAX_KEPT_LINE_BYTES;

/// A piece of a relayed stream: a whole line (with its newline), or bytes passed on as they
/// are (a line past the bound, the end of a stream without its newline).
pub(super) enum Piece<'a> {
    Line(&'a [u8]),
    Through(&'a [u8]),
}

/// Cuts a relayed stream into lines. A line longer than the recorder keeps is passed on
/// unparsed (no operator rewrites, and no timing holds, what the transcript could not show).
#[derive(Default)]
pub(super) struct Lines {
    buf: Vec<u8>,
    /// Passing the rest of an over-long line through, until its newline.
    passing: bool,
}

impl Lines {
    pub(super) fn feed(&mut self, mut chunk: &[u8], each: &mut dyn FnMut(Piece)) {
        while !chunk.is_empty() {
            let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (&chunk[..=at], true),
                None => (chunk, false),
            };
            chunk = &chunk[part.len()..];
            if self.passing {
                each(Piece::Through(part));
                self.passing = !newline;
                continue;
            }
            if newline && self.buf.is_empty() {
                each(Piece::Line(part));
                continue;
            }
            self.buf.extend_from_slice(part);
            if newline {
                let line = std::mem::take(&mut self.buf);
                each(Piece::Line(&line));
            } else if self.buf.len() > MAX_KEPT_LINE_BYTES {
                let line = std::mem::take(&mut self.buf);
                each(Piece::Through(&line));
                self.passing = true;
            }
        }
    }

    /// Whether a line too long to keep is passing through (its end not yet seen).
    pub(super) fn mid_line(&self) -> bool {
        self.passing
    }

    pub(super) fn finish(&mut self, each: &mut dyn FnMut(Piece)) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            each(Piece::Through(&rest));
        }
        self.passing = false;
    }
}
