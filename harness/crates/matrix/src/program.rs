//! The program a driver's command line starts, found the one way every check uses it: loading
//! a drivers file (a missing program is an error), a cell's prerequisites (an interpreter the
//! suites name that is not on `PATH` is a missing prerequisite), the external driver's command
//! (`--driver-cmd`, a runner's `driver_cmd`).
//!
//! A command is shell words. Leading `NAME=value` words are assignments, not the program.
//! `{repo}` is the harness repository; `{cache}` the harness cache (a published driver that
//! `harness provision` installs); any other placeholder (`{codex}`: the tap) is a path the
//! harness provides. A word with a `/` is a path (a relative one from the drivers file's
//! folder); any other word is looked up on `PATH`.

use std::path::{Path, PathBuf};
use suites::declared::{is_assignment, split_words};

/// Where a command's relative names are resolved.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Where<'a> {
    /// The harness repository (`{repo}`).
    pub(crate) repo_root: Option<&'a Path>,
    /// The folder of the drivers file that declares the driver (relative paths).
    pub(crate) base_dir: Option<&'a Path>,
}

/// The program a command starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Program {
    /// An existing file.
    Found(PathBuf),
    /// A placeholder the harness fills in with a path it provides (`{codex}`: the tap).
    Provided(String),
}

/// Why a command's program cannot be started here. The texts name the program the way the
/// user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProgramError {
    /// Not words a program can be given without a shell (`suites::declared::split_words`).
    #[error("command {0}")]
    NotShellWords(String),
    #[error("command `{0}` names no program")]
    NoProgram(String),
    #[error("command `{0}` uses {{repo}}, but the harness repository root cannot be found (run from inside the repository)")]
    NoRepoRoot(String),
    #[error(
        "its program `{program}` is not installed ({path} is not a file; run `harness provision`)"
    )]
    NotProvisioned { program: String, path: String },
    #[error("cannot choose the harness cache for `{program}`: {why}")]
    NoCache { program: String, why: String },
    #[error("its program `{program}` does not exist ({path} is not a file)")]
    NoFile { program: String, path: String },
    #[error("its program `{program}` is not installed (not found on PATH)")]
    NotOnPath { program: String },
}

impl ProgramError {
    /// A bare program name that is not on `PATH` (`python3`): what the machine is expected to
    /// provide, so a missing prerequisite where the suites name it (docs/prerequisites.md).
    pub(crate) fn is_not_on_path(&self) -> bool {
        matches!(self, ProgramError::NotOnPath { .. })
    }
}

/// Whether `command`'s program is a path (`./venv/bin/python`, `{repo}/x`), not a name that
/// each environment looks up on its own `PATH` (a container's is not the host's).
pub(crate) fn names_a_path(command: &str) -> bool {
    split_words(command)
        .ok()
        .and_then(|words| words.into_iter().find(|w| !is_assignment(w)))
        .is_some_and(|program| program.contains('/'))
}

/// The program `command` starts.
pub(crate) fn resolve(command: &str, at: Where) -> Result<Program, ProgramError> {
    let words = split_words(command).map_err(|e| ProgramError::NotShellWords(e.to_string()))?;
    let Some(program) = words.into_iter().find(|w| !is_assignment(w)) else {
        return Err(ProgramError::NoProgram(command.to_string()));
    };
    let program = match (program.strip_prefix("{repo}"), at.repo_root) {
        (Some(rest), Some(root)) => format!("{}{rest}", root.display()),
        (Some(_), None) => return Err(ProgramError::NoRepoRoot(command.to_string())),
        (None, _) => program,
    };
    if let Some(rest) = program.strip_prefix("{cache}") {
        let cache = codex::provision::cache_root().map_err(|e| ProgramError::NoCache {
            program: program.clone(),
            why: format!("{e:#}"),
        })?;
        let path = PathBuf::from(format!("{}{rest}", cache.display()));
        return if path.is_file() {
            Ok(Program::Found(path))
        } else {
            Err(ProgramError::NotProvisioned {
                path: path.display().to_string(),
                program,
            })
        };
    }
    if program.contains('{') {
        return Ok(Program::Provided(program));
    }
    if program.contains('/') {
        let path = match at.base_dir {
            Some(dir) if Path::new(&program).is_relative() => dir.join(&program),
            _ => PathBuf::from(&program),
        };
        return if path.is_file() {
            Ok(Program::Found(path))
        } else {
            Err(ProgramError::NoFile {
                path: path.display().to_string(),
                program,
            })
        };
    }
    sandbox::system::which(&program)
        .map(Program::Found)
        .ok_or(ProgramError::NotOnPath { program })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What only the resolver decides (the paths and `PATH` cases are the drivers file's
    /// check, `crate::load`'s test): `{repo}`, and a placeholder the harness provides.
    #[test]
    fn the_repository_and_the_harness_placeholders_resolve() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run-driver"), "#!/bin/sh\n").unwrap();
        let at = Where {
            repo_root: Some(dir.path()),
            base_dir: None,
        };
        assert_eq!(
            resolve("{repo}/run-driver --x", at),
            Ok(Program::Found(dir.path().join("run-driver")))
        );
        assert_eq!(
            resolve("{codex} app-server", at),
            Ok(Program::Provided("{codex}".into()))
        );
    }

    /// The bug that had three ways to check one thing: a command that starts with an
    /// assignment passed the drivers file's check and failed the prerequisite check (which took
    /// `FOO=1` for the program).
    #[test]
    fn a_leading_assignment_is_not_the_program() {
        assert_eq!(
            resolve("PYTHONUNBUFFERED=1 sh -c true", Where::default()),
            Ok(Program::Found(sandbox::system::which("sh").unwrap()))
        );
        let missing = resolve("A=1 no-such-driver-program-x9", Where::default()).unwrap_err();
        assert!(missing.is_not_on_path(), "{missing}");
        assert!(missing.to_string().contains("`no-such-driver-program-x9`"));
        assert_eq!(
            resolve("A=1 B=2", Where::default()),
            Err(ProgramError::NoProgram("A=1 B=2".into()))
        );
        assert!(program_is_a_path_only_with_a_slash());
        assert!(matches!(
            resolve("{repo}/x", Where::default()),
            Err(ProgramError::NoRepoRoot(_))
        ));
    }

    fn program_is_a_path_only_with_a_slash() -> bool {
        names_a_path("A=1 ./venv/bin/python x.py")
            && names_a_path("{repo}/driver")
            && !names_a_path("A=1 python3 driver.py")
    }
}
