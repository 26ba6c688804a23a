//! The `harness` crate's trials that need what a machine may lack: root, runc, Docker, the kvm
//! runtime, bubblewrap, chromium, the pinned real Codex, the published drivers (each trial's
//! name says what it needs). A libtest-mimic harness (`harness = false`): a missing
//! prerequisite makes a trial ignored with the reason on stderr, or a failure under `CI=true`
//! (common/prereq.rs). The tests that need none of it are in the other binary, `fast`.
//!
//! Each former test binary is a module here, and its trials carry the module's name as their
//! kind: `--list` prints `[env_stale] reaps_…: test`, and `cargo test -p harness --test
//! needs_root_runc_codex -- env_stale` runs that module's trials (libtest-mimic filters on the
//! kind and the name; `--exact NAME` still takes the bare trial name).
//!
//! The modules run one after another, each in a libtest-mimic run of its own, as the former
//! binaries did. Several trials check process- or machine-wide state (the cgroups below
//! /sys/fs/cgroup, runc's and Docker's containers, this process's children, a reaping pass
//! that is machine-wide), which a trial of another module running at the same time would
//! disturb; and some modules run their trials one at a time while others run them in
//! parallel. A run per module keeps both exactly as they were: within a module the trials run
//! as many at a time as before, and two modules' trials never overlap. (A gate around each
//! trial could not do this here: a libtest-mimic `Trial` cannot be wrapped once built, and one
//! run has one thread count.)

// Each module uses its own part of the shared helpers.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;

mod auto_review_fidelity;
mod broken_drivers;
mod codex_extra_version;
mod codex_own_faults;
mod codex_protocol_lists;
mod codex_real;
mod drift;
mod driver_schema_fidelity;
mod driver_uid;
mod env_kvm;
mod env_runc;
mod env_stale;
mod evidence_attack;
mod evidence_fallback;
mod evidence_size;
mod explore_corpus;
mod fake_schema_fidelity;
mod input_checks;
mod kill_harness;
mod long_line_driver;
mod mcp_elicitation;
mod mutate_fidelity;
mod published_drivers;
mod published_fidelity;
mod report_chromium;
mod repro;
mod schema_copies;
mod shutdown_cli;
mod tap_timing_codex;

use libtest_mimic::{Arguments, Conclusion, Trial};
use std::process::ExitCode;

/// How many of a module's trials run at once.
#[derive(Clone, Copy)]
enum Threads {
    /// As the command line asks (`--test-threads`), else one per core.
    AsAsked,
    /// As the command line asks, else this many.
    AskedOr(usize),
    /// One at a time, whatever the command line asks: each trial looks at machine-wide state
    /// the next would change, or measures time.
    One,
}

/// A former test binary: its trials, how many run at once, and what it did before building
/// them and after its last one ended.
struct Module {
    name: &'static str,
    trials: fn() -> Vec<Trial>,
    threads: Threads,
    set_up: fn(),
    tear_down: fn(),
}

impl Module {
    fn new(name: &'static str, trials: fn() -> Vec<Trial>) -> Self {
        Self {
            name,
            trials,
            threads: Threads::AsAsked,
            set_up: || {},
            tear_down: || {},
        }
    }
}

/// A module's entry: its name is the module's own, so the kind its trials carry cannot drift
/// from the file they are in.
macro_rules! module {
    ($name:ident) => {
        Module::new(stringify!($name), $name::trials)
    };
}

fn modules() -> Vec<Module> {
    vec![
        module!(auto_review_fidelity),
        module!(broken_drivers),
        module!(codex_extra_version),
        module!(codex_own_faults),
        module!(codex_protocol_lists),
        module!(codex_real),
        module!(drift),
        module!(driver_schema_fidelity),
        module!(driver_uid),
        module!(env_kvm),
        module!(env_runc),
        Module {
            threads: Threads::One,
            set_up: env_stale::set_up,
            tear_down: env_stale::tear_down,
            ..module!(env_stale)
        },
        module!(evidence_attack),
        module!(evidence_fallback),
        module!(evidence_size),
        module!(explore_corpus),
        module!(fake_schema_fidelity),
        module!(input_checks),
        Module {
            threads: Threads::One,
            ..module!(kill_harness)
        },
        module!(long_line_driver),
        module!(mcp_elicitation),
        module!(mutate_fidelity),
        module!(published_drivers),
        Module {
            threads: Threads::AskedOr(published_fidelity::PARALLEL_PAIRS),
            tear_down: published_fidelity::tear_down,
            ..module!(published_fidelity)
        },
        Module {
            threads: Threads::One,
            ..module!(report_chromium)
        },
        module!(repro),
        module!(schema_copies),
        module!(shutdown_cli),
        module!(tap_timing_codex),
    ]
}

fn main() -> ExitCode {
    // Some trials run a child copy of this binary, told by an environment variable what to play.
    if env_kvm::run_as_child() || env_runc::run_as_child() || env_stale::run_as_child() {
        return ExitCode::SUCCESS;
    }
    let args = Arguments::from_args();
    let mut total = none_run(0);
    let mut failed_modules = Vec::new();
    for module in modules() {
        let conclusion = run_module(&args, &module);
        if conclusion.has_failed() {
            failed_modules.push(module.name);
        }
        total.num_filtered_out += conclusion.num_filtered_out;
        total.num_passed += conclusion.num_passed;
        total.num_failed += conclusion.num_failed;
        total.num_ignored += conclusion.num_ignored;
        total.num_measured += conclusion.num_measured;
    }
    if !args.list {
        println!(
            "all modules: {} passed; {} failed{}; {} ignored; {} filtered out",
            total.num_passed,
            total.num_failed,
            if failed_modules.is_empty() {
                String::new()
            } else {
                format!(" (in {})", failed_modules.join(", "))
            },
            total.num_ignored,
            total.num_filtered_out
        );
    }
    total.exit_code()
}

/// One module's libtest-mimic run, with its own thread count; nothing printed when the
/// command line's filter selects none of its trials (its trials count as filtered out).
fn run_module(args: &Arguments, module: &Module) -> Conclusion {
    if filter_names_another_module(args, module.name) {
        return none_run(0);
    }
    (module.set_up)();
    let trials: Vec<Trial> = (module.trials)()
        .into_iter()
        .map(|trial| trial.with_kind(module.name))
        .collect();
    let conclusion = if trials.iter().all(|trial| args.is_filtered_out(trial)) {
        none_run(trials.len() as u64)
    } else {
        let mut args = args.clone();
        args.test_threads = match module.threads {
            Threads::AsAsked => args.test_threads,
            Threads::AskedOr(threads) => args.test_threads.or(Some(threads)),
            Threads::One => Some(1),
        };
        libtest_mimic::run(&args, trials)
    };
    (module.tear_down)();
    conclusion
}

/// The conclusion of a run in which no trial ran, `filtered_out` of them filtered out.
fn none_run(filtered_out: u64) -> Conclusion {
    Conclusion {
        num_filtered_out: filtered_out,
        num_passed: 0,
        num_failed: 0,
        num_ignored: 0,
        num_measured: 0,
    }
}

/// Whether the filter names another module's kind (`[env_stale]`, `[env_stale] reaps_…`), so
/// that none of this module's trials can match it: then its trials are not even built, since
/// building some modules' trials checks prerequisites for seconds (the published drivers'
/// modules: over 15 s). Each trial matches as `[kind] name`, and `[` appears nowhere else.
fn filter_names_another_module(args: &Arguments, module: &str) -> bool {
    let Some(filter) = args.filter.as_deref().filter(|f| f.starts_with('[')) else {
        return false;
    };
    let kind = format!("[{module}] ");
    !(kind.starts_with(filter) || filter.starts_with(&kind))
}
