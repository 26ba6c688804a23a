//! Stage 3: the wire tap in the cell's folder (`tap/bin/codex`), relaying to the cell's
//! app-server, and the app-server program a driver is given instead of the real one.

use super::folders::CellFolders;
use anyhow::Result;
use driver::run::AppServerProgram;
use tap::{InstalledTap, TapConfig, TapProgram};

/// Install the tap relaying to `app_server`: the driver launches `codex app-server …`; the tap
/// runs the app-server's program with its leading arguments (less the `app-server` the driver
/// gives itself), the driver's arguments, and the cell's extra arguments.
pub fn install(
    tap: &TapProgram,
    app_server: &AppServerProgram,
    folders: &CellFolders,
) -> Result<InstalledTap> {
    // The driver gives `app-server` itself; the program's own flags stay (e.g. the fake's
    // `--sandbox real` of `harness repro`).
    let prefix: Vec<String> = app_server
        .leading_args
        .iter()
        .filter(|a| *a != "app-server")
        .cloned()
        .collect();
    let dir = folders.root.join("tap");
    let config = TapConfig {
        program: app_server.program.clone(),
        prefix,
        server_args: app_server.extra_args.clone(),
        env: app_server.env.clone(),
        transcript: folders.transcript(),
        launches: dir.join("launches"),
        max_line_bytes: tap::MAX_RECORDED_LINE_BYTES,
        max_transcript_bytes: tap::MAX_TRANSCRIPT_BYTES_PER_LAUNCH,
    };
    tap::install(&dir, tap, &config, folders.owner)
}

/// The app-server as a driver sees it: the tap's `codex app-server`, the cell's environment.
pub fn as_seen_by_driver(tap: &InstalledTap, app_server: &AppServerProgram) -> AppServerProgram {
    AppServerProgram {
        program: tap.codex.clone(),
        leading_args: vec!["app-server".into()],
        extra_args: Vec::new(),
        env: app_server.env.clone(),
    }
}
