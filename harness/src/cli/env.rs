//! `harness env list` and `harness env probe NAME`.

use sandbox::environment::{check_prerequisites, select_runtime};
use sandbox::probe::{CanaryReport, ProbeReport};
use sandbox::{catalogue, probe};
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// List the environments: the platform each stands for, the mechanism used here, the exact
    /// message Codex users see, whether it fails Codex at start-up or per command, the
    /// canaries' expected results, and whether it can run here.
    List,
    /// Run the canary bubblewrap inside an environment; print expected vs seen. Exits non-zero
    /// when they disagree or the environment cannot run here.
    Probe {
        /// Environment name (see `harness env list`).
        name: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn main(cmd: Command) -> ExitCode {
    match cmd {
        Command::List => {
            print!("{}", list_table());
            ExitCode::SUCCESS
        }
        Command::Probe { name, json } => probe(&name, json),
    }
}

/// The `env list` table.
pub fn list_table() -> String {
    let mut out = String::new();
    for spec in catalogue::all() {
        let runnable = match select_runtime(spec.name) {
            Ok(runtime) => format!("yes ({})", runtime.as_str()),
            Err(missing) => format!("no: {missing}"),
        };
        out.push_str(&format!(
            "{}\n  stands for:  {}\n  mechanism:   {}\n  message:     {}\n  graders row: {}\n  fails Codex: {}\n  canaries:    start-up {}; per command {}{}\n  runs here:   {}\n",
            spec.name,
            spec.stands_for,
            spec.restricts,
            spec.message.unwrap_or("none (Codex works)"),
            spec.signature_row.unwrap_or("none"),
            spec.fails_at.describe(),
            spec.expected_probe.describe(),
            spec.expected_command.describe(),
            spec.expected_retry
                .as_ref()
                .map(|r| format!("; --no-proc retry {}", r.describe()))
                .unwrap_or_default(),
            runnable
        ));
    }
    out
}

fn probe(name: &str, json: bool) -> ExitCode {
    if let Err(err) = catalogue::spec(name) {
        eprintln!("harness env probe: {err:#}");
        return ExitCode::from(2);
    }
    if let Err(missing) = check_prerequisites(name) {
        eprintln!("harness env probe {name}: cannot run here: {missing}");
        return ExitCode::from(3);
    }
    let scratch = match tempfile::Builder::new().prefix("ccf-probe-").tempdir() {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!("harness env probe: creating a scratch folder: {err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("harness env probe: {err}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(probe::probe(name, scratch.path())) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("harness env probe {name}: {err:#}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(err) => {
                eprintln!("harness env probe: {err}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{}", render_report(&report));
    }
    if report.agrees {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn render_canary(label: &str, report: &CanaryReport) -> String {
    let seen_exit = report
        .seen
        .exit_code
        .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
    let stderr = report.seen.stderr.trim_end();
    format!(
        "{label}\n  canary:      {}\n  expected:    {}\n  seen:        exit {}{}\n  agrees:      {}\n",
        report.canary.join(" "),
        report.expected.describe(),
        seen_exit,
        if stderr.is_empty() {
            String::new()
        } else {
            format!(": {}", stderr.replace('\n', "\n               "))
        },
        if report.agrees { "yes" } else { "NO" },
    )
}

/// The human-readable probe report.
pub fn render_report(report: &ProbeReport) -> String {
    let startup = CanaryReport {
        canary: report.canary.clone(),
        expected: report.expected.clone(),
        agrees: report.expected.matches(&report.seen),
        seen: report.seen.clone(),
    };
    let mut out = format!("environment: {}\n", report.environment);
    out.push_str(&render_canary(
        "start-up canary (Codex's start-up probe)",
        &startup,
    ));
    out.push_str(&render_canary(
        "per-command canary (the flags Codex passes for each sandboxed command)",
        &report.command,
    ));
    if let Some(retry) = &report.retry {
        out.push_str(&render_canary(
            "retry canary (Codex's --no-proc fallback: without --proc /proc)",
            retry,
        ));
    }
    out.push_str(&format!(
        "agrees:      {}\ntook:        {} ms\n",
        if report.agrees { "yes" } else { "NO" },
        report.elapsed_ms
    ));
    out
}
