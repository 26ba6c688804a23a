//! The matrix as run: the shipped suites plus the user's drivers file and `--codex` versions,
//! with every declared driver's program checked — a program the user named that does not exist
//! is an error, never a skip.

use crate::program::{self, Where};
use anyhow::{Context, Result};
use std::path::Path;
use suites::spec::DeclaredDriver;
use suites::{Cell, DriversFile, Extras, Matrix};

/// Environment variables that do what `--drivers` and `--codex` do, for the suites test binary
/// (`HARNESS_DRIVERS=drivers.toml cargo test -p suites --test cells`). Versions are
/// comma-separated.
pub const DRIVERS_VAR: &str = "HARNESS_DRIVERS";
pub(crate) const CODEX_VERSIONS_VAR: &str = "HARNESS_CODEX_VERSIONS";

/// Load the matrix with `drivers` (a drivers file) and `codex_versions` added.
pub fn load_matrix(
    drivers: Option<&Path>,
    codex_versions: &[String],
    repo_root: Option<&Path>,
) -> Result<Matrix> {
    let drivers = drivers.map(DriversFile::read).transpose()?;
    if let Some(file) = &drivers {
        for (name, driver) in &file.drivers {
            check_declared_program(driver, repo_root)
                .with_context(|| format!("{}: driver `{name}`", file.name))?;
        }
    }
    let matrix = suites::load_with(&Extras {
        drivers,
        codex_versions: codex_versions.to_vec(),
    })?;
    check_personas(&matrix)?;
    Ok(matrix)
}

/// A fake runner's `plays` must name a release the fake has a persona for.
fn check_personas(matrix: &Matrix) -> Result<()> {
    for (name, runner) in &matrix.file.runners {
        if let Some(version) = &runner.plays {
            fake_app_server::persona::find(version)
                .map_err(|e| anyhow::anyhow!("runner `{name}`: plays = \"{version}\": {e}"))?;
        }
    }
    Ok(())
}

/// [`load_matrix`] from [`DRIVERS_VAR`] and [`CODEX_VERSIONS_VAR`].
pub fn load_matrix_from_env(repo_root: Option<&Path>) -> Result<Matrix> {
    let drivers = std::env::var_os(DRIVERS_VAR).filter(|v| !v.is_empty());
    let versions: Vec<String> = std::env::var(CODEX_VERSIONS_VAR)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
        .collect();
    load_matrix(drivers.as_deref().map(Path::new), &versions, repo_root)
}

/// The program a declared driver's command line starts must exist (see [`crate::program`]:
/// on `PATH`, or as a path — relative paths from the drivers file's folder; `{repo}` is the
/// harness repository). A program that is itself a placeholder (`{codex}`) is the tap, which
/// the harness provides.
pub(crate) fn check_declared_program(
    driver: &DeclaredDriver,
    repo_root: Option<&Path>,
) -> Result<()> {
    let at = Where {
        repo_root,
        base_dir: driver.base_dir.as_deref(),
    };
    program::resolve(&driver.command, at)?;
    Ok(())
}

/// Why `cell` cannot run, known from the suites' data alone: a scenario that does not exist
/// (`builtin:nope`) or does not parse, a `task` table the driver's task does not take. Such a
/// cell is listed as an error and fails at once, with this reason, never runs.
pub fn cell_error(cell: &Cell) -> Option<String> {
    let checked = crate::stages::folders::task_for(cell)
        .map(drop)
        .and_then(|()| {
            crate::stages::folders::check_scenario(cell)
                .with_context(|| format!("case `{}`: its scenario", cell.id.case))
        });
    checked.err().map(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn driver(command: &str, base_dir: Option<&Path>) -> DeclaredDriver {
        let text = format!(
            "[drivers.d]\ncommand = {command:?}\ncodex = \"path\"\nmodes = [\"standard\"]\n"
        );
        let mut file = DriversFile::parse(&text, "drivers.toml", None).unwrap();
        let mut driver = file.drivers.remove("d").unwrap();
        driver.base_dir = base_dir.map(Path::to_path_buf);
        driver
    }

    #[rstest]
    #[case::on_path("sh -c true", true)]
    #[case::after_assignments("FOO=1 BAR=2 sh -c true", true)]
    #[case::missing_on_path("no-such-driver-program-x9 --mode {mode}", false)]
    #[case::relative_to_the_drivers_file("./run-driver --prompt {prompt}", true)]
    #[case::relative_missing("./missing-driver", false)]
    #[case::absolute_missing("/nonexistent/driver", false)]
    #[case::in_the_cache_missing("{cache}/pypi/nothing-0.0.0/bin/python run.py", false)]
    fn declared_programs_must_exist(#[case] command: &str, #[case] exists: bool) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run-driver"), "#!/bin/sh\n").unwrap();
        let result = check_declared_program(&driver(command, Some(dir.path())), None);
        assert_eq!(result.is_ok(), exists, "{command}: {result:?}");
        if let Err(e) = result {
            let message = e.to_string();
            assert!(message.contains("its program `"), "{message}");
        }
    }

    #[test]
    fn a_missing_drivers_file_is_an_error_naming_it() {
        let err = load_matrix(Some(Path::new("/nonexistent/drivers.toml")), &[], None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/drivers.toml"), "{err}");
    }
}
