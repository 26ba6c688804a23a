//! The harness's mark on the event streams it writes itself. Each line of a cell's
//! `events.jsonl` ends with `"mac":"<hex>"`: HMAC-SHA256 of the line without it, under a key
//! only the harness's user can read (`<cache>/keys/evidence-key`, 0600 in a 0700 folder, hidden
//! from every driver's view). A stream is the harness's own evidence only where every line
//! carries a valid mark: a stream written anywhere else (by a driver under the events
//! contract, by hand, or edited after the run) can still be graded, but it cannot pass
//! (`harness grade`; docs/events.md, "The harness's mark").

use anyhow::{bail, Context, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The folder of the key below the harness cache: hidden from local drivers, never bound into
/// a container.
pub(crate) const KEY_FOLDER: &str = "keys";
const KEY_FILE: &str = "evidence-key";
const KEY_BYTES: usize = 32;
/// A mark with the closing brace after it: `,"mac":"` + 64 hex digits + `"}`.
const MARK_OPENING: &str = ",\"mac\":\"";
const MARK_BYTES: usize = MARK_OPENING.len() + 64 + 2;

/// The key the harness marks its streams with.
pub struct Key([u8; KEY_BYTES]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

impl Key {
    /// The folder holding the key of the harness cache `cache`.
    pub fn folder(cache: &Path) -> PathBuf {
        cache.join(KEY_FOLDER)
    }

    /// This user's key below `cache`, made the first time (from the kernel's random source).
    pub fn load_or_create(cache: &Path) -> Result<Key> {
        if let Some(key) = Key::load(cache)? {
            return Ok(key);
        }
        let folder = Key::folder(cache);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        let mut bytes = [0u8; KEY_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .context("reading /dev/urandom for the evidence key")?;
        // Written whole under a name of this process's, then linked into place: a process that
        // lost the race reads the winner's key, never a half-written one.
        let staged = folder.join(format!(".{KEY_FILE}.{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staged)
            .with_context(|| format!("creating {}", staged.display()))?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        let linked = std::fs::hard_link(&staged, folder.join(KEY_FILE));
        let _ = std::fs::remove_file(&staged);
        match linked {
            Ok(()) => Ok(Key(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Key::load(cache)?.context("the evidence key vanished while it was being made")
            }
            Err(e) => Err(e).context("placing the evidence key"),
        }
    }

    /// This user's key below `cache`, if one was made; an error when it is not this user's
    /// alone (another user could then mark streams).
    pub fn load(cache: &Path) -> Result<Option<Key>> {
        let path = Key::folder(cache).join(KEY_FILE);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let uid = nix::unistd::geteuid().as_raw();
        if !meta.file_type().is_file()
            || meta.uid() != uid
            || meta.permissions().mode() & 0o077 != 0
            || meta.len() != KEY_BYTES as u64
        {
            bail!(
                "{} is not a key of this user's alone (a {}-byte regular file, mode 0600, owned by uid {uid}): remove it, and the next run makes a new one",
                path.display(),
                KEY_BYTES
            );
        }
        let mut bytes = [0u8; KEY_BYTES];
        std::fs::File::open(&path)
            .and_then(|mut file| file.read_exact(&mut bytes))
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(Some(Key(bytes)))
    }

    fn mac_of(&self, line: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(line);
        hex::encode(mac.finalize().into_bytes())
    }

    /// `line` (one JSON object, no newline) with its mark.
    pub fn mark(&self, line: &str) -> String {
        let Some(body) = line.strip_suffix('}') else {
            return line.to_string();
        };
        format!("{body}{MARK_OPENING}{}\"}}", self.mac_of(line.as_bytes()))
    }

    /// The line as it was before it was marked, when `line` (no newline) carries this key's
    /// valid mark.
    pub(crate) fn verify(&self, line: &[u8]) -> Option<Vec<u8>> {
        let cut = line.len().checked_sub(MARK_BYTES)?;
        let (body, mark) = line.split_at(cut);
        let mac = mark
            .strip_prefix(MARK_OPENING.as_bytes())?
            .strip_suffix(b"\"}")?;
        let mut original = body.to_vec();
        original.push(b'}');
        // Compared in constant time (hmac's verify), so a forger learns nothing from timing.
        let mut check = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        check.update(&original);
        check.verify_slice(&hex::decode(mac).ok()?).ok()?;
        Some(original)
    }
}

/// A stream read through the harness's mark: each line that carries a valid mark is handed on
/// without it; any other line is handed on as it is and counted. Lines longer than `max_line`
/// are handed on uncounted and unchecked (the reader they go to refuses them).
pub struct MarkedLines<R> {
    inner: R,
    key: Option<Key>,
    max_line: usize,
    pending: Vec<u8>,
    at: usize,
    /// 1-based numbers of the lines without a valid mark (the first few), and how many.
    pub unmarked_first: Option<u64>,
    pub unmarked: u64,
    line: u64,
}

impl<R: BufRead> MarkedLines<R> {
    pub fn new(inner: R, key: Option<Key>, max_line: usize) -> Self {
        Self {
            inner,
            key,
            max_line,
            pending: Vec::new(),
            at: 0,
            unmarked_first: None,
            unmarked: 0,
            line: 0,
        }
    }

    fn next_line(&mut self) -> std::io::Result<bool> {
        self.pending.clear();
        self.at = 0;
        let read = (&mut self.inner)
            .take(self.max_line as u64 + MARK_BYTES as u64 + 2)
            .read_until(b'\n', &mut self.pending)?;
        if read == 0 {
            return Ok(false);
        }
        let newline = self.pending.last() == Some(&b'\n');
        if !newline {
            // A line past the bound, or the stream's last line without its newline: as it is.
            return Ok(true);
        }
        self.line += 1;
        let text = &self.pending[..self.pending.len() - 1];
        if text.iter().all(u8::is_ascii_whitespace) {
            return Ok(true);
        }
        match self.key.as_ref().and_then(|key| key.verify(text)) {
            Some(mut original) => {
                original.push(b'\n');
                self.pending = original;
            }
            None => {
                self.unmarked += 1;
                self.unmarked_first.get_or_insert(self.line);
            }
        }
        Ok(true)
    }
}

impl<R: BufRead> Read for MarkedLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.pending.len() && !self.next_line()? {
            return Ok(0);
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_line_verifies_and_any_change_or_other_key_does_not() {
        let cache = tempfile::tempdir().unwrap();
        let key = Key::load_or_create(cache.path()).unwrap();
        let line = r#"{"v":3,"seq":0,"run":"r","source":"harness","type":"x"}"#;
        let marked = key.mark(line);
        assert!(marked.contains("\"mac\":\""), "{marked}");
        assert_eq!(key.verify(marked.as_bytes()).unwrap(), line.as_bytes());
        let edited = marked.replace("\"seq\":0", "\"seq\":1");
        assert_eq!(key.verify(edited.as_bytes()), None);
        assert_eq!(key.verify(line.as_bytes()), None);
        let other = tempfile::tempdir().unwrap();
        let other = Key::load_or_create(other.path()).unwrap();
        assert_eq!(other.verify(marked.as_bytes()), None);
        // The same key the next time.
        let again = Key::load(cache.path()).unwrap().unwrap();
        assert!(again.verify(marked.as_bytes()).is_some());
        let mode = std::fs::metadata(Key::folder(cache.path()).join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// The mark is a member the event reader ignores: a marked stream reads as the same events.
    #[test]
    fn a_marked_stream_reads_as_its_events() {
        use graders::events::{Body, Ending, RunEnded, Source, WorkspaceEvidence};
        let dir = tempfile::tempdir().unwrap();
        let key = std::sync::Arc::new(Key::load_or_create(dir.path()).unwrap());
        let path = dir.path().join("events.jsonl");
        let mut log = crate::event_log::EventLog::to_file_marked("r", &path, key).unwrap();
        log.emit(
            Source::Harness,
            Body::WorkspaceEvidence(WorkspaceEvidence {
                pattern: "plan-write-probe-*".into(),
                probes: vec![],
            }),
        )
        .unwrap();
        log.end(RunEnded {
            ending: Ending::Succeeded,
            retry_offered: false,
            error_code: None,
            reason: None,
        })
        .unwrap();
        log.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("\"mac\":\"").count(), 2, "{text}");
        let verdict = graders::grade::grade_reader_with(
            "codex-planning-read-only",
            "plan-write-refused",
            std::io::BufReader::new(std::fs::File::open(&path).unwrap()),
            graders::reader::ReaderConfig::default(),
        )
        .unwrap();
        assert!(
            !verdict.reason.contains("invalid") && !verdict.reason.contains("malformed"),
            "{verdict:?}"
        );
    }

    #[test]
    fn a_key_others_can_read_is_refused() {
        let cache = tempfile::tempdir().unwrap();
        Key::load_or_create(cache.path()).unwrap();
        let path = Key::folder(cache.path()).join(KEY_FILE);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Key::load(cache.path()).unwrap_err().to_string();
        assert!(error.contains("not a key of this user's alone"), "{error}");
    }

    #[test]
    fn marked_lines_hand_on_the_original_lines_and_count_the_others() {
        let cache = tempfile::tempdir().unwrap();
        let key = Key::load_or_create(cache.path()).unwrap();
        let a = r#"{"seq":0}"#;
        let b = r#"{"seq":1}"#;
        let stream = format!("{}\n{b}\n{}\n", key.mark(a), key.mark(b));
        let mut lines = MarkedLines::new(stream.as_bytes(), Some(key), 1 << 20);
        let mut out = String::new();
        lines.read_to_string(&mut out).unwrap();
        assert_eq!(out, format!("{a}\n{b}\n{b}\n"));
        assert_eq!((lines.unmarked, lines.unmarked_first), (1, Some(2)));
    }
}
