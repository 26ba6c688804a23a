//! The subcommands a harness binary serves besides its own. A cell's app-server (the fake), its
//! wire tap and the reference driver all run as processes of the binary that runs the cells —
//! `harness`, or the suites test binary — so no cell depends on a separately built binary. The
//! names are here and nowhere else: the stages build command lines with them, and [`dispatch`]
//! (which both binaries call first thing in `main`) runs them.

use anyhow::{anyhow, Result};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

/// `BINARY fake-app-server ARGS…`: the fake app-server (`fake_app_server::cli_main`).
pub const FAKE_APP_SERVER: &str = "fake-app-server";
/// `BINARY tap --socket PATH -- ARGS…`: the wire tap (`tap::relay::main`).
pub(crate) const TAP: &str = "tap";
/// `BINARY told-exec`: a prestarted container's stand-in, which runs what its stdin names
/// (`sandbox::prestart::told_exec`).
pub(crate) const TOLD_EXEC: &str = "told-exec";
/// `BINARY drive`: the reference driver as a driver process
/// (`driver::reference::standalone::main`).
pub const DRIVE: &str = "drive";

/// Run the hidden subcommand `args` (the process's arguments after its name) start with, and
/// return its exit code; `None` when they start with none.
pub fn dispatch(args: &[OsString]) -> Option<ExitCode> {
    let (first, rest) = args.split_first()?;
    match first.to_str()? {
        FAKE_APP_SERVER => Some(fake_app_server::cli_main(rest.iter().cloned())),
        TAP => Some(tap::relay::main(rest.to_vec())),
        DRIVE => Some(driver::reference::standalone::main()),
        TOLD_EXEC => Some(sandbox::prestart::told_exec()),
        _ => None,
    }
}

/// The fake app-server's leading arguments: `fake-app-server app-server` and `extra`.
pub fn fake_app_server_args(extra: &[String]) -> Vec<String> {
    [FAKE_APP_SERVER, "app-server"]
        .into_iter()
        .map(String::from)
        .chain(extra.iter().cloned())
        .collect()
}

/// The wire tap, as `binary` serves it.
pub fn tap_program(binary: &Path) -> tap::TapProgram {
    tap::TapProgram {
        program: binary.to_path_buf(),
        leading_args: vec![TAP.into()],
    }
}

/// The reference driver's command line (`sh -c` words): `binary drive`.
pub(crate) fn reference_driver_command(binary: &Path) -> Result<String> {
    let program = binary.to_string_lossy();
    let quoted =
        shlex::try_quote(&program).map_err(|e| anyhow!("cannot quote `{program}`: {e}"))?;
    Ok(format!("{quoted} {DRIVE}"))
}
