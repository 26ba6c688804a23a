//! Opening an evidence file to read it back: the one way every reader of a cell's evidence — the
//! graders' callers, the cell pipeline, the reports and their HTML pages, `harness grade` —
//! opens it. Evidence is written beside an untrusted driver and may be a folder downloaded from
//! CI, so a file there is not taken on its word: a FIFO must not block its reader, a link must
//! not lead it elsewhere (`/dev/zero`, another run's file), and no file is read past a bound.
//!
//! The file is opened with `O_NONBLOCK | O_NOFOLLOW` (opening a FIFO neither blocks nor waits
//! for a writer; a link is refused by the kernel), checked through its descriptor to be a
//! regular file no larger than the bound, and read through a reader that fails rather than read
//! past the bound (a file growing after the check).
//!
//! A large file the harness compressed once its cell was graded ([`compress`]) is `NAME.gz`
//! beside where `NAME` was: opening `NAME` when there is none opens `NAME.gz` the same way and
//! reads it decompressed, the bound then bounding what it decompresses to (a gzip bomb fails
//! the read, naming the file and the bound). Compressed or not, its bytes are whoever wrote
//! them: a reader trusts a `.gz` no more than the file it stands for.

mod compress;

pub use compress::{compress, Compressed};
use flate2::read::GzDecoder;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The bound of an evidence file streamed line by line, whose readers hold one line at a time:
/// it bounds the time a reader spends on it (a sparse file of a terabyte is a regular file).
pub const MAX_STREAMED_BYTES: u64 = 4 << 30;

/// What a compressed evidence file's name adds to the name it stands for.
pub const COMPRESSED_SUFFIX: &str = ".gz";

/// Why an evidence file was not read; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceFileError {
    #[error("opening {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("{} is {what}, not a regular file: evidence is only read from regular files", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{} holds {len} bytes, more than its bound of {bound} bytes", path.display())]
    TooLarge { path: PathBuf, len: u64, bound: u64 },
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("writing {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// An opened evidence file: a regular file, read (decompressed when it is `NAME.gz`) at most to
/// its bound.
#[derive(Debug)]
pub struct EvidenceFile {
    source: Source,
    path: PathBuf,
    bound: u64,
    len: u64,
    position: u64,
}

enum Source {
    Plain(File),
    Gzip(Box<GzDecoder<File>>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Plain(_) => "Plain",
            Source::Gzip(_) => "Gzip",
        })
    }
}

/// `path` with [`COMPRESSED_SUFFIX`] added to its name.
pub fn compressed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(COMPRESSED_SUFFIX);
    PathBuf::from(name)
}

/// Open `path` as an evidence file of at most `bound` bytes — or, when there is none,
/// `path.gz`, of at most `bound` bytes on disk and decompressed; `Ok(None)` when there is
/// neither.
pub fn open(path: &Path, bound: u64) -> Result<Option<EvidenceFile>, EvidenceFileError> {
    if let Some((file, len)) = open_regular(path, bound)? {
        return Ok(Some(EvidenceFile {
            source: Source::Plain(file),
            path: path.to_path_buf(),
            bound,
            len,
            position: 0,
        }));
    }
    let compressed = compressed_path(path);
    let Some((file, len)) = open_regular(&compressed, bound)? else {
        return Ok(None);
    };
    Ok(Some(EvidenceFile {
        source: Source::Gzip(Box::new(GzDecoder::new(file))),
        path: compressed,
        bound,
        len,
        position: 0,
    }))
}

/// `path` opened without following a link or blocking on a FIFO, checked to be a regular file
/// of at most `bound` bytes, and its size; `Ok(None)` when there is none.
fn open_regular(path: &Path, bound: u64) -> Result<Option<(File, u64)>, EvidenceFileError> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW's answer to a link as the last component.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(EvidenceFileError::NotRegular {
                path: path.to_path_buf(),
                what: "a symbolic link",
            })
        }
        // Opening a socket file.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(EvidenceFileError::NotRegular {
                path: path.to_path_buf(),
                what: "a socket or a device without a reader",
            })
        }
        Err(source) => {
            return Err(EvidenceFileError::Open {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let meta = file.metadata().map_err(|source| EvidenceFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a folder"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "something else"
        };
        return Err(EvidenceFileError::NotRegular {
            path: path.to_path_buf(),
            what,
        });
    }
    if meta.len() > bound {
        return Err(EvidenceFileError::TooLarge {
            path: path.to_path_buf(),
            len: meta.len(),
            bound,
        });
    }
    Ok(Some((file, meta.len())))
}

/// The whole of the evidence file `path` (at most `bound` bytes, decompressed when it is
/// `path.gz`); `Ok(None)` when there is none.
pub fn read(path: &Path, bound: u64) -> Result<Option<Vec<u8>>, EvidenceFileError> {
    let Some(mut file) = open(path, bound)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(usize::try_from(file.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|source| EvidenceFileError::Read {
            path: file.path.clone(),
            source,
        })?;
    Ok(Some(bytes))
}

impl EvidenceFile {
    /// Its size on disk when it was opened (compressed, when it is).
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file opened: `NAME.gz` when the file is compressed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it is read decompressed (it can then only be read from its start).
    pub fn is_compressed(&self) -> bool {
        matches!(self.source, Source::Gzip(_))
    }

    /// How many bytes (decompressed) have been read so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    fn past_bound(&self) -> io::Error {
        io::Error::other(match self.source {
            Source::Plain(_) => format!(
                "{} grew past its bound of {} bytes while it was read",
                self.path.display(),
                self.bound
            ),
            Source::Gzip(_) => format!(
                "{} decompresses to more than its bound of {} bytes: refused (a gzip bomb?)",
                self.path.display(),
                self.bound
            ),
        })
    }

    fn read_source(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.source {
            Source::Plain(file) => file.read(buf),
            Source::Gzip(decoder) => decoder.read(buf).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("decompressing {}: {e}", self.path.display()),
                )
            }),
        }
    }
}

impl Read for EvidenceFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.bound.saturating_sub(self.position);
        if left == 0 {
            // At the bound: the file must end here.
            let mut probe = [0u8; 1];
            return match self.read_source(&mut probe)? {
                0 => Ok(0),
                _ => Err(self.past_bound()),
            };
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.read_source(&mut buf[..want])?;
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for EvidenceFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match &mut self.source {
            Source::Plain(file) => {
                self.position = file.seek(to)?;
                Ok(self.position)
            }
            Source::Gzip(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{} is compressed: it is read from its start, not sought",
                    self.path.display()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_its_bound_is_read_and_anything_else_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("events.jsonl");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read(&file, 10).unwrap().unwrap(), b"0123456789");
        assert!(read(&dir.path().join("absent"), 10).unwrap().is_none());

        let err = read(&file, 9).unwrap_err().to_string();
        assert!(
            err.contains("events.jsonl") && err.contains("bound of 9"),
            "{err}"
        );

        let fifo = dir.path().join("transcript.jsonl");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = read(&fifo, 10).unwrap_err().to_string();
        assert!(err.contains("transcript.jsonl is a FIFO"), "{err}");

        let link = dir.path().join("summary.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = read(&link, 10).unwrap_err().to_string();
        assert!(err.contains("summary.json is a symbolic link"), "{err}");

        let err = read(dir.path(), 10).unwrap_err().to_string();
        assert!(err.contains("a folder"), "{err}");
    }

    #[test]
    fn a_file_that_grows_past_its_bound_while_read_fails_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr.log");
        std::fs::write(&path, b"abc").unwrap();
        let mut file = open(&path, 4).unwrap().unwrap();
        std::fs::write(&path, b"abcdefgh").unwrap();
        let mut bytes = Vec::new();
        let err = file.read_to_end(&mut bytes).unwrap_err().to_string();
        assert!(err.contains("grew past its bound of 4"), "{err}");
    }
}
