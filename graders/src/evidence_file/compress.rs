//! Compressing an evidence file in place once its cell has been graded: `NAME` becomes
//! `NAME.gz`, which [`super::open`] reads back decompressed where `NAME` was asked for.

use super::MAX_STREAMED_BYTES;
use super::{compressed_path, open_regular, EvidenceFile, EvidenceFileError, Source};
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What compressing a file did: its size before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed {
    pub before: u64,
    pub after: u64,
}

/// Replace the evidence file `path` by `path.gz` when it holds at least `min_bytes`; `Ok(None)`
/// when it was left as it is (absent, smaller, or a `path.gz` already there, which is never
/// overwritten). For the harness only, once the cell was graded and everything it ran has
/// ended; the file is opened as any evidence file is (no link followed, a regular file).
pub fn compress(path: &Path, min_bytes: u64) -> Result<Option<Compressed>, EvidenceFileError> {
    let Some((file, len)) = open_regular(path, MAX_STREAMED_BYTES)? else {
        return Ok(None);
    };
    let target = compressed_path(path);
    if len < min_bytes || std::fs::symlink_metadata(&target).is_ok() {
        return Ok(None);
    }
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    let mut original = EvidenceFile {
        source: Source::Plain(file),
        path: path.to_path_buf(),
        bound: len,
        len,
        position: 0,
    };
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let written = write_compressed(&mut original, &partial, modified).and_then(|after| {
        // A hard link never replaces a file already there.
        std::fs::hard_link(&partial, &target)
            .map_err(|source| EvidenceFileError::Write {
                path: target.clone(),
                source,
            })
            .map(|()| after)
    });
    let _ = std::fs::remove_file(&partial);
    let after = written?;
    std::fs::remove_file(path).map_err(|source| EvidenceFileError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Some(Compressed { before: len, after }))
}

/// `original` gzip-compressed into the new file `partial` (its modification time kept); its
/// size.
fn write_compressed(
    original: &mut EvidenceFile,
    partial: &Path,
    modified: Option<std::time::SystemTime>,
) -> Result<u64, EvidenceFileError> {
    let write_error = |source| EvidenceFileError::Write {
        path: partial.to_path_buf(),
        source,
    };
    let out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(partial)
        .map_err(write_error)?;
    let mut encoder = GzEncoder::new(io::BufWriter::new(out), Compression::default());
    io::copy(original, &mut encoder).map_err(|source| EvidenceFileError::Read {
        path: original.path.clone(),
        source,
    })?;
    let out = encoder
        .finish()
        .and_then(|mut buffered| {
            buffered.flush()?;
            buffered.into_inner().map_err(|e| e.into_error())
        })
        .map_err(write_error)?;
    if let Some(modified) = modified {
        out.set_modified(modified).map_err(write_error)?;
    }
    Ok(out.metadata().map_err(write_error)?.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence_file::{open, read};
    use std::io::Read;

    #[test]
    fn a_large_file_is_read_back_through_its_name_once_compressed_and_a_small_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let large = dir.path().join("transcript.jsonl");
        let text: String = (0..20_000)
            .map(|n| format!("{{\"seq\":{n},\"line\":\"the same words again\"}}\n"))
            .collect();
        std::fs::write(&large, &text).unwrap();
        let small = dir.path().join("stderr.log");
        std::fs::write(&small, b"short").unwrap();

        let done = compress(&large, 1024).unwrap().unwrap();
        assert_eq!(done.before, text.len() as u64);
        assert!(done.after * 10 < done.before, "{done:?}");
        assert!(!large.exists());
        assert!(dir.path().join("transcript.jsonl.gz").is_file());
        assert_eq!(compress(&small, 1024).unwrap(), None);
        assert!(small.is_file());

        assert_eq!(
            read(&large, MAX_STREAMED_BYTES).unwrap().unwrap(),
            text.as_bytes()
        );
        let file = open(&large, MAX_STREAMED_BYTES).unwrap().unwrap();
        assert!(file.is_compressed());
        assert!(file.path().ends_with("transcript.jsonl.gz"));
        // Compressing again finds nothing to do.
        assert_eq!(compress(&large, 1024).unwrap(), None);
    }

    #[test]
    fn a_gzip_bomb_is_refused_naming_the_file_and_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let bomb = dir.path().join("events.jsonl.gz");
        let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
        encoder.write_all(&vec![b'\n'; 64 << 20]).unwrap();
        let packed = encoder.finish().unwrap();
        assert!(packed.len() < 1 << 20, "{}", packed.len());
        std::fs::write(&bomb, &packed).unwrap();

        let bound = 8 << 20;
        let err = read(&dir.path().join("events.jsonl"), bound)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("events.jsonl.gz") && err.contains(&format!("bound of {bound} bytes")),
            "{err}"
        );
        // A stream reader meets the same wall.
        let mut file = open(&dir.path().join("events.jsonl"), bound)
            .unwrap()
            .unwrap();
        let err = io::copy(&mut file, &mut io::sink())
            .unwrap_err()
            .to_string();
        assert!(err.contains("gzip bomb"), "{err}");
    }

    #[test]
    fn a_link_or_a_file_already_there_is_never_followed_nor_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, vec![b'x'; 4096]).unwrap();
        let link = dir.path().join("model-requests.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = compress(&link, 1).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(target.is_file());

        // A `.gz` the driver left beside its file: neither is touched, and the plain one is
        // what is read.
        let events = dir.path().join("events.jsonl");
        std::fs::write(&events, vec![b'\n'; 4096]).unwrap();
        std::fs::write(dir.path().join("events.jsonl.gz"), b"not gzip").unwrap();
        assert_eq!(compress(&events, 1).unwrap(), None);
        assert_eq!(read(&events, 1 << 20).unwrap().unwrap().len(), 4096);

        // A corrupt `.gz` alone is an error naming it.
        std::fs::remove_file(&events).unwrap();
        let mut bytes = Vec::new();
        let err = open(&events, 1 << 20)
            .unwrap()
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap_err()
            .to_string();
        assert!(err.contains("events.jsonl.gz"), "{err}");
    }
}
