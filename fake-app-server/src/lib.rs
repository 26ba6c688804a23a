//! A scriptable fake of `codex app-server`.

pub mod model_log;
pub mod scenario;

use std::ffi::OsString;
use std::process::ExitCode;

/// Entry point shared by the `fake-app-server` binary and every binary that embeds the fake
/// (e.g. `harness fake-app-server …`). `args` excludes the program name; a leading `app-server`
/// is accepted so a driver can launch it exactly like `codex app-server`.
pub fn cli_main<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let _ = args.into_iter().count();
    eprintln!("fake-app-server: not implemented yet");
    ExitCode::from(2)
}
