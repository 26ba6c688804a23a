//! The tap's socket by path, whatever the path's length. A Unix socket's address holds at most
//! 107 bytes, and a cell folder below a long `--out` is longer than that; such a path is reached
//! through its folder's descriptor (`/proc/self/fd/N/NAME`), which names the same folder in a
//! few bytes, in the harness and in a container alike.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Paths shorter than this are used as they are.
const DIRECT_PATH_MAX: usize = 100;

fn through_folder<T>(path: &Path, use_path: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    if path.as_os_str().len() < DIRECT_PATH_MAX {
        return use_path(path);
    }
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a socket path needs a folder and a name",
        )
    };
    let folder = path.parent().ok_or_else(invalid)?;
    let name = path.file_name().ok_or_else(invalid)?;
    let folder = File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(folder)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", folder.as_raw_fd())).join(name);
    let result = use_path(&short);
    drop(folder);
    result
}

/// Listen on `path` (which must not exist).
pub(crate) fn bind(path: &Path) -> io::Result<UnixListener> {
    through_folder(path, |p| UnixListener::bind(p))
}

/// Connect to the listener at `path`.
pub(crate) fn connect(path: &Path) -> io::Result<UnixStream> {
    through_folder(path, |p| UnixStream::connect(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_below_a_long_path_is_bound_and_reached() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("x".repeat(150));
        std::fs::create_dir(&deep).unwrap();
        let path = deep.join("codex.sock");
        let listener = bind(&path).unwrap();
        assert!(path.exists(), "the socket is in the folder named");
        let _client = connect(&path).unwrap();
        listener.accept().unwrap();
    }
}
