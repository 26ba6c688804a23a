//! A scriptable fake of `codex app-server`: the real stdio JSON-RPC protocol of Codex 0.169.0
//! (or another release it has a persona for, see [`persona`]), a real (bubblewrap) or simulated
//! sandbox, and a scenario that scripts the model and faults.
//!
//! Its API, for the harness and its tests: the command line of the release it plays ([`cli`],
//! the `-c` overrides and permission profiles in [`config`]), the release's persona
//! ([`persona`]), the scenario format ([`scenario`]), the sandbox model ([`sandbox`]), the
//! JSON-RPC framing and error texts ([`protocol`]), stdout's one writer ([`output`]), what the
//! model was told ([`model_log`]), Codex-shaped ids ([`ids`]), and a line reader with a timeout
//! for its clients ([`line_reader`]). Every other item is `pub(crate)`.

#![deny(unreachable_pub)]

mod apply_patch;
pub mod cli;
pub mod config;
pub mod ids;
pub mod line_reader;
pub mod model_log;
mod model_log_writer;
pub mod output;
pub mod persona;
pub mod protocol;
pub mod sandbox;
pub mod scenario;
mod schema_copy;
mod server;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Entry point shared by the `fake-app-server` binary and every binary that embeds the fake
/// (e.g. `harness fake-app-server …`). `args` excludes the program name; they are read as the
/// played release's `codex` reads its own (`crate::cli`), so a driver launches the fake exactly
/// like `codex app-server`.
pub fn cli_main<I: IntoIterator<Item = OsString>>(args: I) -> ExitCode {
    let args = match cli::parse(args) {
        Ok(args) => args,
        Err(exit) => {
            print!("{}", exit.stdout);
            eprint!("{}", exit.stderr);
            let _ = std::io::stdout().flush();
            return ExitCode::from(exit.status);
        }
    };
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(message) => {
            // Codex prints start-up failures as `Error: …` and exits 1.
            eprintln!("Error: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(args: cli::Args) -> Result<u8, String> {
    match &args.action {
        cli::Action::Serve => {}
        cli::Action::Version => {
            println!("codex-cli {}", protocol::shapes::cli_version());
            return Ok(0);
        }
        cli::Action::StartupConfig => {
            print!("{}", persona::current().startup_config());
            return Ok(0);
        }
        cli::Action::GenerateJsonSchema { out } => return schema_copy::generate(out).map(|()| 0),
        cli::Action::NotPlayed(command) => {
            return Err(format!(
                "fake-app-server plays `codex app-server` only, not `{command}`"
            ))
        }
        cli::Action::Refused(message) => return Err(message.clone()),
    }
    let config = config::Config::from_overrides(&args.overrides).map_err(|e| e.to_string())?;
    let scenario = scenario::Scenario::from_spec(&args.scenario).map_err(|e| e.to_string())?;
    let sandbox = sandbox::Sandbox::new(
        args.sandbox,
        scenario.environment.clone(),
        Duration::from_millis(scenario.limits.command_ms),
    )?;
    let transcript = match &args.transcript {
        Some(path) => Some(
            graders::wire::transcript::write::Appender::create(path)
                .map_err(|e| format!("cannot create transcript {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let model_log = match &args.model_log {
        Some(path) => model_log_writer::ModelLog::create(path)
            .map_err(|e| format!("cannot create model log {}: {e}", path.display()))?,
        None => model_log_writer::ModelLog::disabled(),
    };
    let out = output::Output::new(transcript, scenario.notifications.clone())
        .with_extra_fields(scenario.extra_fields);
    let shared = server::Shared::new(scenario, config, sandbox, out, model_log);
    exit_zero_on_sigterm()?;
    Ok(server::serve(shared))
}

/// Codex shuts down on SIGTERM and exits 0 (measured with 0.169: a serving `codex app-server`,
/// stdin still open, sent SIGTERM, exits with status 0); a client like the Python SDK closes
/// stdin and then terminates the server, so dying of the signal would differ from Codex. Every
/// message is flushed as it is written, so there is nothing left to write at exit.
fn exit_zero_on_sigterm() -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            std::process::exit(0);
        }
    });
    Ok(())
}
