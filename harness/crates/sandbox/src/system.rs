//! Small helpers over the machine's programs, each in one place: finding a program on `PATH`,
//! waiting for a child process with a bound, the standard output of a bounded command, and the
//! pids in `/proc`.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Find a program on PATH (the first folder that holds a file of that name).
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The pids of the processes in `/proc` (empty when it cannot be read).
pub fn process_ids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Wait for `child` at most `bound`; past it the child is killed and reaped, and the answer is
/// `None`. (std has no timed wait; `wait-timeout` gives one without a runtime, so this works
/// before any tokio runtime exists.)
pub fn wait_bounded(child: &mut Child, bound: Duration) -> std::io::Result<Option<ExitStatus>> {
    match child.wait_timeout(bound)? {
        Some(status) => Ok(Some(status)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Ok(None)
        }
    }
}

/// Run `PROGRAM ARGS` (stdin and stderr closed, stdout to `stdout`) within `bound`; whether it
/// ended in time and successfully.
pub fn run_bounded(
    program: &str,
    args: &[&str],
    stdout: Stdio,
    bound: Duration,
) -> std::io::Result<bool> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()?;
    Ok(wait_bounded(&mut child, bound)?.is_some_and(|status| status.success()))
}

/// The standard output of a successful `PROGRAM ARGS`; `None` when it fails or overruns
/// `bound`. The output goes to a temporary file, not a pipe, so a long answer cannot block the
/// program while this side waits.
pub fn command_stdout(
    program: &str,
    args: &[&str],
    bound: Duration,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut output = tempfile::tempfile()?;
    if !run_bounded(program, args, Stdio::from(output.try_clone()?), bound)? {
        return Ok(None);
    }
    use std::io::{Read, Seek};
    let mut bytes = Vec::new();
    output.rewind()?;
    output.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_wait_kills_a_child_that_overruns_and_reports_one_that_ends() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let started = std::time::Instant::now();
        assert_eq!(
            wait_bounded(&mut sleeper, Duration::from_millis(100)).unwrap(),
            None
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            sleeper.try_wait().unwrap().is_some(),
            "the child was reaped"
        );
        let mut quick = Command::new("true").spawn().unwrap();
        let status = wait_bounded(&mut quick, Duration::from_secs(10)).unwrap();
        assert!(status.is_some_and(|s| s.success()));
        assert_eq!(
            command_stdout("sh", &["-c", "echo hi"], Duration::from_secs(10)).unwrap(),
            Some(b"hi\n".to_vec())
        );
        assert_eq!(
            command_stdout("sh", &["-c", "exit 3"], Duration::from_secs(10)).unwrap(),
            None
        );
        assert!(which("sh").is_some());
        assert!(which("no-such-program-x9").is_none());
    }
}
