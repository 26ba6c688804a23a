//! The system calls of a view, each made between fork and exec on memory prepared before the
//! fork (no allocation).

use std::ffi::CString;

// The mount API's flags (linux/mount.h, linux/fcntl.h): a stable kernel ABI.
pub(super) const OPEN_TREE_CLONE: libc::c_uint = 1;
pub(super) const AT_RECURSIVE: libc::c_uint = 0x8000;
pub(super) const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
pub(super) const MOUNT_ATTR_RDONLY: u64 = 1;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub(super) struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

pub(super) fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

pub(super) fn check_long(rc: libc::c_long) -> std::io::Result<()> {
    check(if rc == 0 { 0 } else { -1 })
}

/// A fresh tmpfs on `path`.
pub(super) unsafe fn cover(
    path: &CString,
    ancestors: &[CString],
    options: &CString,
) -> std::io::Result<()> {
    make_folders(ancestors.iter().chain(std::iter::once(path)))?;
    check(libc::mount(
        c"tmpfs".as_ptr(),
        path.as_ptr(),
        c"tmpfs".as_ptr(),
        libc::MS_NOSUID | libc::MS_NODEV,
        options.as_ptr().cast(),
    ))
}

/// The tmpfs on `path` made read-only.
pub(super) unsafe fn seal(path: &CString) -> std::io::Result<()> {
    check(libc::mount(
        std::ptr::null(),
        path.as_ptr(),
        std::ptr::null(),
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        std::ptr::null(),
    ))
}

/// Each folder made (0755) where it is not there yet, in order.
unsafe fn make_folders<'a>(folders: impl Iterator<Item = &'a CString>) -> std::io::Result<()> {
    for folder in folders {
        made_or_there(libc::mkdir(folder.as_ptr(), 0o755))?;
    }
    Ok(())
}

/// A `mkdir` or an exclusive create that made the entry or found it there.
fn made_or_there(rc: libc::c_int) -> std::io::Result<()> {
    if rc >= 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EEXIST) => Ok(()),
        _ => Err(error),
    }
}

/// The cloned tree `fd` at `path`, made first where a cover left nothing.
pub(super) unsafe fn place(
    fd: libc::c_int,
    path: &CString,
    ancestors: &[CString],
    file: bool,
) -> std::io::Result<()> {
    make_folders(ancestors.iter())?;
    if file {
        let made = libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644,
        );
        made_or_there(made)?;
        if made >= 0 {
            libc::close(made);
        }
    } else {
        make_folders(std::iter::once(path))?;
    }
    check_long(libc::syscall(
        libc::SYS_move_mount,
        fd,
        c"".as_ptr(),
        libc::AT_FDCWD,
        path.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
    ))
}

/// The new network namespace's loopback interface up: the process keeps `127.0.0.1` of its own,
/// and reaches no service of the host's or another cell's over it.
pub(super) unsafe fn loopback_up() -> std::io::Result<()> {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut request: libc::ifreq = std::mem::zeroed();
    request.ifr_name[0] = b'l' as libc::c_char;
    request.ifr_name[1] = b'o' as libc::c_char;
    let mut result = check(libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut request));
    if result.is_ok() {
        request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        result = check(libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &request));
    }
    libc::close(fd);
    result
}
