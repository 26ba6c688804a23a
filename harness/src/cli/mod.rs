//! One module per `harness` subcommand; each exposes `Args` (clap) and `main`.

pub mod bench;
pub mod coverage;
pub mod drift;
pub mod env;
pub mod explore;
pub mod fidelity;
pub mod grade;
pub mod launch;
pub mod mutate;
pub mod notices;
pub mod provision;
pub mod report;
pub mod repro;
pub mod run;

/// `-j N`: how many cells (or pairs) run at once, at least one; `0` would run nothing.
pub fn jobs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (how many run at once)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

/// A Codex version (`MAJOR.MINOR.PATCH[-PRERELEASE]`), checked before anything is created or
/// installed for it: it becomes a folder name.
pub fn codex_version(text: &str) -> Result<String, String> {
    suites::generate::check_version(text).map(|()| text.to_string())
}

/// A path argument, made absolute against the current folder where the command line is read,
/// once: drivers, app-servers and runtimes (runc's `cwd`) get these paths while running in other
/// folders, so a relative one would name something else there.
pub fn absolute_path(text: &str) -> Result<std::path::PathBuf, String> {
    if text.is_empty() {
        return Err("is empty: give a path".into());
    }
    std::path::absolute(text).map_err(|e| format!("cannot be made absolute: {e}"))
}

/// An input path as [`absolute_path`], or `-` for standard input (kept as it is).
pub fn absolute_path_or_stdin(text: &str) -> Result<std::path::PathBuf, String> {
    if text == "-" {
        return Ok(text.into());
    }
    absolute_path(text)
}

/// A command line the user names (`--driver-cmd`): it must have a program.
pub fn command_line(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("is empty: give the driver's command line".into());
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use std::path::PathBuf;

    #[derive(Parser)]
    struct Repro {
        #[command(flatten)]
        args: super::repro::Args,
    }

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        args: super::run::Args,
    }

    #[derive(Parser)]
    struct Report {
        #[command(flatten)]
        args: super::report::Args,
    }

    #[derive(Parser)]
    struct Grade {
        #[command(flatten)]
        args: super::grade::Args,
    }

    fn here(relative: &str) -> Option<PathBuf> {
        Some(std::env::current_dir().unwrap().join(relative))
    }

    /// `harness repro ENV --out rel` once handed runc a relative `cwd` ("Cwd must be an absolute
    /// path") and then said the failure did not reproduce: every path argument is absolute from
    /// the moment the command line is read.
    #[test]
    fn relative_path_arguments_are_made_absolute_where_the_command_line_is_read() {
        let repro = Repro::try_parse_from(["repro", "rtm-newaddr", "--out", "rel"]).unwrap();
        assert_eq!(repro.args.out, here("rel"));
        let run =
            Run::try_parse_from(["run", "--out", "o", "--drivers", "d/drivers.toml"]).unwrap();
        assert_eq!(run.args.out, here("o"));
        assert_eq!(run.args.drivers, here("d/drivers.toml"));
        let report = Report::try_parse_from(["report", "a", "../b", "--out", "c"]).unwrap();
        assert_eq!(
            report.args.dirs,
            vec![here("a").unwrap(), here("../b").unwrap()]
        );
        assert_eq!(report.args.out, here("c"));
        let absolute = Repro::try_parse_from(["repro", "uidmap", "--out", "/x/y"]).unwrap();
        assert_eq!(absolute.args.out, Some(PathBuf::from("/x/y")));
    }

    #[test]
    fn an_empty_path_is_refused_and_standard_input_stays_a_dash() {
        let empty = Repro::try_parse_from(["repro", "rtm-newaddr", "--out", ""]);
        assert!(empty.is_err_and(|e| e.to_string().contains("is empty")));
        let grade = Grade::try_parse_from(["grade", "--suite", "s", "--case", "c", "-"]).unwrap();
        assert_eq!(grade.args.events, PathBuf::from("-"));
        let file =
            Grade::try_parse_from(["grade", "--suite", "s", "--case", "c", "e.jsonl"]).unwrap();
        assert_eq!(Some(file.args.events), here("e.jsonl"));
    }
}
