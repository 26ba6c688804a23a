//! Running one child process with a time bound, capturing its output.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// What a finished (or killed) process produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// stdout and stderr interleaved as written (only when run merged).
    pub merged: String,
    pub duration: Duration,
    pub pid: u32,
}

/// Exit code reported for a command killed at the time bound (what a shell reports for SIGKILL).
const KILLED_EXIT: i32 = 137;

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(9))
}

fn read_all(mut reader: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = reader.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Run `program args` in `cwd`. With `merge`, stdout and stderr share one pipe (the order a
/// terminal would show); otherwise they are captured apart. `configure` may adjust the command
/// (uid, env) before it starts.
pub fn run(
    program: &Path,
    args: &[String],
    cwd: &Path,
    merge: bool,
    limit: Duration,
    configure: impl FnOnce(&mut Command),
) -> std::io::Result<ProcessOutput> {
    let started = Instant::now();
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd).stdin(Stdio::null());
    let merged_reader = if merge {
        let (reader, writer) = std::io::pipe()?;
        command.stdout(writer.try_clone()?).stderr(writer);
        Some(reader)
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    configure(&mut command);
    let mut child = command.spawn()?;
    // The parent's copies of the pipe's write end live in `command`; drop them so the reader
    // sees EOF when the child exits.
    drop(command);
    let pid = child.id();
    let readers = match merged_reader {
        Some(reader) => (read_all(reader), None),
        None => (
            read_all(child.stdout.take().expect("piped stdout")),
            Some(read_all(child.stderr.take().expect("piped stderr"))),
        ),
    };
    let exit = match child.wait_timeout(limit)? {
        Some(status) => exit_code(status),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            KILLED_EXIT
        }
    };
    let first = readers.0.join().unwrap_or_default();
    let second = readers.1.map(|h| h.join().unwrap_or_default());
    let (stdout, stderr, merged) = match second {
        Some(stderr) => (first.clone(), stderr.clone(), format!("{first}{stderr}")),
        None => (String::new(), String::new(), first),
    };
    Ok(ProcessOutput {
        exit_code: exit,
        stdout,
        stderr,
        merged,
        duration: started.elapsed(),
        pid,
    })
}
