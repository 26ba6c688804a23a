//! `harness env list` and `harness env probe NAME`.

use crate::env;
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// List the environments: what each restricts, the platform it stands for, the expected
    /// probe result, and whether it can run here.
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
    for spec in env::spec::all() {
        let runnable = match env::select_runtime(spec.name) {
            Ok(runtime) => format!("yes ({})", runtime.as_str()),
            Err(missing) => format!("no: {missing}"),
        };
        out.push_str(&format!(
            "{}\n  restricts:   {}\n  stands for:  {}\n  probe:       {}\n  runs here:   {}\n",
            spec.name,
            spec.restricts,
            spec.stands_for,
            spec.expected_probe.describe(),
            runnable
        ));
    }
    out
}

fn probe(name: &str, json: bool) -> ExitCode {
    if let Err(err) = env::spec(name) {
        eprintln!("harness env probe: {err:#}");
        return ExitCode::from(2);
    }
    if let Err(missing) = env::check_prerequisites(name) {
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
    let report = match runtime.block_on(env::probe(name, scratch.path())) {
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

/// The human-readable probe report.
pub fn render_report(report: &env::ProbeReport) -> String {
    let seen_exit = report
        .seen
        .exit_code
        .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
    let stderr = report.seen.stderr.trim_end();
    format!(
        "environment: {}\ncanary:      {}\nexpected:    {}\nseen:        exit {}{}\nagrees:      {}\ntook:        {} ms\n",
        report.environment,
        report.canary.join(" "),
        report.expected.describe(),
        seen_exit,
        if stderr.is_empty() {
            String::new()
        } else {
            format!(": {}", stderr.replace('\n', "\n             "))
        },
        if report.agrees { "yes" } else { "NO" },
        report.elapsed_ms
    )
}
