//! A launch through a recorder as a tap makes one, for the tests of the relays that look into
//! the lines (a mutated cell's, one with a transport timing).

use crate::frame::{self, Hello, Kind};
use crate::session::{AppServerSetup, HostSpawn, Options, Recording};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A launch through a recorder with `options` whose app-server is the shell script `server`: the
/// driver sends `sent` and (`hang_up_first`) closes its end, then reads its stdout to the end
/// (bounded: 20 s); what it read, the transcript, the applications counted and how long the
/// read took.
pub(super) fn through(
    server: &str,
    options: Options,
    sent: &[u8],
    hang_up_first: bool,
) -> (Vec<u8>, Vec<Value>, u64, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let transcript = dir.path().join("t.jsonl");
    let setup = AppServerSetup {
        program: "/bin/sh".into(),
        prefix: vec!["-c".into(), server.into()],
        server_args: Vec::new(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        inherit_env: Vec::new(),
    };
    let recording =
        Recording::start_with(&socket, &transcript, setup, Arc::new(HostSpawn), options).unwrap();
    let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let hello = Hello {
        argv: vec!["app-server".into()],
        env_names: Vec::new(),
        cwd: "/".into(),
        pid: std::process::id(),
    };
    // The driver's pipes, handed over as the tap hands over its stdin and stdout.
    let (stdin_read, stdin_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let (stdout_read, stdout_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    {
        use std::os::fd::AsFd;
        frame::send_with_fds(
            &stream,
            Kind::Hello,
            &serde_json::to_vec(&hello).unwrap(),
            &[stdin_read.as_fd(), stdout_write.as_fd()],
        )
        .unwrap();
    }
    drop((stdin_read, stdout_write));
    // In two chunks, cutting a line: the relays see whole lines.
    let (a, b) = sent.split_at(sent.len() / 2);
    let mut driver_stdin = std::fs::File::from(stdin_write);
    use std::io::{Read, Write};
    driver_stdin.write_all(a).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    driver_stdin.write_all(b).unwrap();
    let hang_up = |driver_stdin: std::fs::File| {
        drop(driver_stdin);
        // As the tap says once its stdin hangs up.
        frame::Writer::new(&stream)
            .send(Kind::StdinEof, b"")
            .unwrap();
    };
    let mut driver_stdin = Some(driver_stdin);
    if hang_up_first {
        hang_up(driver_stdin.take().unwrap());
    }
    let reading = std::time::Instant::now();
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut echoed = Vec::new();
        let _ = std::fs::File::from(stdout_read).read_to_end(&mut echoed);
        let _ = read_tx.send(echoed);
    });
    let echoed = read_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the driver's stdout ends");
    let took = reading.elapsed();
    if let Some(driver_stdin) = driver_stdin {
        hang_up(driver_stdin);
    }
    let mut reader = std::io::BufReader::new(stream);
    let mut payload = Vec::new();
    while let Some(kind) = frame::read(&mut reader, &mut payload).unwrap() {
        if kind == Kind::Exit {
            break;
        }
    }
    // The tap's end goes, so the launch is over before the recording's grace.
    drop(reader);
    recording.finish(Duration::from_secs(5));
    let records = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (echoed, records, recording.mutations_applied(), took)
}
