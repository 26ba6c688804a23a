//! The runners and cells added to the shipped suites at run time.
//!
//! - `--codex VERSION` adds a reference-driver runner `runner-codex-<VERSION with dashes>` (a copy
//!   of `runner-codex` at that version) to every matrix block that has `runner-codex`.
//! - Each driver `NAME` of a drivers file becomes one runner per app-server: `NAME-fake`, and per
//!   real-Codex version `NAME-codex` (the pin, `runner-codex`'s version) or
//!   `NAME-codex-<VERSION with dashes>` (e.g. `NAME-codex-0-160-0`, `NAME-codex-0-171-0`). These
//!   take the reference driver's place in every shipped matrix block: a block with a fake runner
//!   gets `NAME-fake`, one with a real-Codex runner gets every `NAME-codex*`, over the block's
//!   environments and cases — so each suite runs the user's driver where it runs its own.
//! - The drivers file's own cases join their (shipped) suite with their own blocks and size.

use crate::cell::{check_case, cross, expand_blocks, Cell};
use crate::drivers::DriversFile;
use crate::names::check_name;
use crate::source::SUITES_FILE;
use crate::spec::{AppServerKind, DeclaredDriver, DriverKind, MatrixBlock, RunnerSpec, SuitesFile};
use crate::SuitesError;
use graders::events::PolicyGeneration;
use std::collections::{BTreeMap, BTreeSet};

/// The shipped runner whose version is the pin, and the model of `--codex` runners.
pub const REFERENCE_CODEX_RUNNER: &str = "runner-codex";

/// A version as one dot-free part of a cell name: `0.171.0` → `0-171-0`.
pub fn dashed(version: &str) -> String {
    version.replace(['.', '+'], "-").to_ascii_lowercase()
}

/// `MAJOR.MINOR.PATCH`, optionally `-PRERELEASE` (lowercase letters, digits, dots, dashes), as
/// npm publishes `@openai/codex`.
pub fn check_version(version: &str) -> Result<(), String> {
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (version, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    let core_ok = numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    // Dot-separated identifiers, none empty: the version names folders (`drift-VERSION`, the
    // cache's install), so `..` must never be one.
    let pre_ok = pre.is_none_or(|p| {
        p.split('.').all(|identifier| {
            !identifier.is_empty()
                && identifier
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
    });
    if core_ok && pre_ok {
        Ok(())
    } else {
        Err(format!(
            "Codex version `{version}` is not of the form MAJOR.MINOR.PATCH[-PRERELEASE] (e.g. 0.171.0)"
        ))
    }
}

/// What is added to the shipped suites at run time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// The user's drivers file (`harness run --drivers FILE`).
    pub drivers: Option<DriversFile>,
    /// More real-Codex versions (`harness run --codex VERSION`, repeatable).
    pub codex_versions: Vec<String>,
}

/// What [`extend`] added besides cells.
pub(crate) struct Extended {
    /// Every real-Codex version of the matrix, the pin first.
    pub codex_versions: Vec<String>,
    /// The runners generated for the drivers file's drivers.
    pub declared_runners: BTreeSet<String>,
}

/// Add the extras' runners and cells to `file` and `per_suite`.
pub(crate) fn extend(
    file: &mut SuitesFile,
    extras: &Extras,
    per_suite: &mut BTreeMap<String, Vec<Cell>>,
) -> Result<Extended, SuitesError> {
    let versions = CodexVersions::of(file, extras)?;
    let reference_extra = add_reference_runners(file, &versions)?;
    let declared = match &extras.drivers {
        Some(drivers) => add_declared_runners(file, drivers, &versions)?,
        None => Declared::default(),
    };
    place_generated_runners(file, per_suite, &reference_extra, &declared);
    if let Some(drivers) = &extras.drivers {
        add_drivers_file_cases(file, drivers, per_suite)?;
    }
    Ok(Extended {
        codex_versions: versions.all,
        declared_runners: declared
            .fake
            .into_iter()
            .chain(declared.fake_plays.into_iter().map(|(_, runner)| runner))
            .chain(declared.codex)
            .collect(),
    })
}

/// The real-Codex versions of the matrix: the reference runner's pin, the shipped runners'
/// versions, then `--codex`'s.
struct CodexVersions {
    pin: Option<String>,
    /// Every version, the pin first.
    all: Vec<String>,
    /// The versions of the shipped runners (the pin first).
    shipped: Vec<String>,
}

impl CodexVersions {
    fn of(file: &SuitesFile, extras: &Extras) -> Result<Self, SuitesError> {
        let pin = file
            .runners
            .get(REFERENCE_CODEX_RUNNER)
            .and_then(|r| r.codex_version.clone());
        let mut versions: Vec<String> = pin.iter().cloned().collect();
        let mut shipped: Vec<&String> = file
            .runners
            .values()
            .filter_map(|r| r.codex_version.as_ref())
            .collect();
        shipped.sort();
        for version in shipped {
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
        let shipped = versions.clone();
        for version in &extras.codex_versions {
            check_version(version).map_err(|message| SuitesError::Invalid {
                file: "--codex".into(),
                message,
            })?;
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
        Ok(Self {
            pin,
            all: versions,
            shipped,
        })
    }
}

/// Reference runners for versions the shipped runners do not cover, copied from the reference
/// runner: their names.
fn add_reference_runners(
    file: &mut SuitesFile,
    versions: &CodexVersions,
) -> Result<Vec<String>, SuitesError> {
    let mut reference_extra = Vec::new();
    let new_versions: Vec<&String> = versions
        .all
        .iter()
        .filter(|v| !versions.shipped.contains(v))
        .collect();
    if new_versions.is_empty() {
        return Ok(reference_extra);
    }
    let template = file
        .runners
        .get(REFERENCE_CODEX_RUNNER)
        .cloned()
        .ok_or_else(|| SuitesError::Invalid {
            file: "--codex".into(),
            message: format!(
                "the suites have no `{REFERENCE_CODEX_RUNNER}` runner to copy for another Codex version"
            ),
        })?;
    for version in new_versions {
        let name = format!("{REFERENCE_CODEX_RUNNER}-{}", dashed(version));
        let runner = RunnerSpec {
            about: format!("{} (Codex {version}, added by --codex)", template.about),
            codex_version: Some(version.clone()),
            ..template.clone()
        };
        add_runner(file, "--codex", &name, runner)?;
        reference_extra.push(name);
    }
    Ok(reference_extra)
}

/// The runners generated for a drivers file's drivers, by app-server.
#[derive(Default)]
struct Declared {
    fake: Vec<String>,
    /// (the release played, the runner), per release a shipped fake runner plays besides the pin.
    fake_plays: Vec<(String, String)>,
    codex: Vec<String>,
}

/// One runner per declared driver and app-server, and per release the fake plays.
fn add_declared_runners(
    file: &mut SuitesFile,
    drivers: &DriversFile,
    versions: &CodexVersions,
) -> Result<Declared, SuitesError> {
    // The releases the shipped fake runners play besides the pin (`plays`).
    let fake_releases: BTreeSet<String> = file
        .runners
        .values()
        .filter(|r| r.app_server == AppServerKind::Fake)
        .filter_map(|r| r.plays.clone())
        .collect();
    let mut declared = Declared::default();
    for (name, driver) in &drivers.drivers {
        let fake = format!("{name}-fake");
        add_runner(
            file,
            &drivers.name,
            &fake,
            declared_runner(name, driver, &drivers.name, None),
        )?;
        declared.fake.push(fake);
        for release in &fake_releases {
            let runner_name = format!("{name}-fake-{}", dashed(release));
            let mut runner = declared_runner(name, driver, &drivers.name, None);
            runner.about = format!("{} playing Codex {release}", runner.about);
            runner.plays = Some(release.clone());
            add_runner(file, &drivers.name, &runner_name, runner)?;
            declared.fake_plays.push((release.clone(), runner_name));
        }
        for version in &versions.all {
            let runner_name = if Some(version) == versions.pin.as_ref() {
                format!("{name}-codex")
            } else {
                format!("{name}-codex-{}", dashed(version))
            };
            add_runner(
                file,
                &drivers.name,
                &runner_name,
                declared_runner(name, driver, &drivers.name, Some(version)),
            )?;
            declared.codex.push(runner_name);
        }
    }
    Ok(declared)
}

/// The generated runners take their place in the shipped blocks: their cells join
/// `per_suite`.
fn place_generated_runners(
    file: &SuitesFile,
    per_suite: &mut BTreeMap<String, Vec<Cell>>,
    reference_extra: &[String],
    declared: &Declared,
) {
    for (suite_name, suite) in &file.suites {
        let cells = per_suite.entry(suite_name.clone()).or_default();
        let mut seen: BTreeSet<String> = cells.iter().map(Cell::name).collect();
        for block in suite.matrix.iter().filter(|block| block.generated_runners) {
            let kinds: Vec<AppServerKind> = block
                .runners
                .iter()
                .filter_map(|r| file.runners.get(r).map(|r| r.app_server))
                .collect();
            let plays: BTreeSet<&String> = block
                .runners
                .iter()
                .filter_map(|r| file.runners.get(r).and_then(|r| r.plays.as_ref()))
                .collect();
            // A declared driver joins the suites of the profiles it is held to.
            let held = |runner: &&String| {
                file.runners[runner.as_str()]
                    .declared
                    .as_ref()
                    .is_some_and(|d| d.profiles.contains(&suite.profile))
            };
            let mut runners: Vec<&String> = Vec::new();
            if block.runners.iter().any(|r| r == REFERENCE_CODEX_RUNNER) {
                runners.extend(reference_extra);
            }
            if kinds.contains(&AppServerKind::Fake) {
                runners.extend(declared.fake.iter().filter(held));
            }
            // Where the block has a fake playing another release, so does each declared driver.
            runners.extend(
                declared
                    .fake_plays
                    .iter()
                    .filter(|(release, _)| plays.contains(release))
                    .map(|(_, runner)| runner)
                    .filter(held),
            );
            if kinds.contains(&AppServerKind::Codex) {
                runners.extend(declared.codex.iter().filter(held));
            }
            let generated = MatrixBlock {
                runners: runners.into_iter().cloned().collect(),
                environments: block.environments.clone(),
                cases: block.cases.clone(),
                generated_runners: true,
            };
            let crossed = cross(file, suite_name, &generated)
                .expect("a shipped block's names were checked by its own expansion");
            cells.extend(crossed.into_iter().filter(|c| seen.insert(c.name())));
        }
    }
}

/// A drivers file's own cases, added to the shipped suites, and the cells of its blocks.
fn add_drivers_file_cases(
    file: &mut SuitesFile,
    drivers: &DriversFile,
    per_suite: &mut BTreeMap<String, Vec<Cell>>,
) -> Result<(), SuitesError> {
    for (suite_name, user) in &drivers.suites {
        let Some(suite) = file.suites.get_mut(suite_name) else {
            return Err(SuitesError::Invalid {
                file: drivers.name.clone(),
                message: format!(
                    "suite `{suite_name}` is not a shipped suite; a drivers file adds cases to the shipped suites (known: {})",
                    file.suites.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            });
        };
        for (case_name, case) in &user.cases {
            check_case(&drivers.name, suite_name, case_name, case)?;
            if suite
                .cases
                .insert(case_name.clone(), case.clone())
                .is_some()
            {
                return Err(SuitesError::Invalid {
                    file: drivers.name.clone(),
                    message: format!(
                        "case `{suite_name}.{case_name}` is already a shipped case; give yours another name"
                    ),
                });
            }
        }
        let cells = expand_blocks(
            &drivers.name,
            file,
            suite_name,
            &user.matrix,
            user.expected_cells,
            user.cases.keys(),
        )?;
        per_suite
            .entry(suite_name.clone())
            .or_default()
            .extend(cells);
    }
    Ok(())
}

fn add_runner(
    file: &mut SuitesFile,
    source: &str,
    name: &str,
    runner: RunnerSpec,
) -> Result<(), SuitesError> {
    check_name(source, "runner", name)?;
    if file.runners.contains_key(name) {
        return Err(SuitesError::Invalid {
            file: source.to_string(),
            message: format!(
                "runner `{name}` would be generated, but {} already has a runner of that name; rename the driver",
                if file.runners[name].driver == DriverKind::Declared {
                    "this matrix"
                } else {
                    SUITES_FILE
                }
            ),
        });
    }
    file.runners.insert(name.to_string(), runner);
    Ok(())
}

fn declared_runner(
    name: &str,
    driver: &DeclaredDriver,
    source: &str,
    codex_version: Option<&String>,
) -> RunnerSpec {
    let what = driver
        .about
        .clone()
        .unwrap_or_else(|| format!("driver `{name}`"));
    let app_server = match codex_version {
        Some(version) => format!("real Codex {version} (offline, mock model API)"),
        None => "fake app-server".to_string(),
    };
    RunnerSpec {
        about: format!("{what}, declared in {source}; {app_server}"),
        driver: DriverKind::Declared,
        app_server: if codex_version.is_some() {
            AppServerKind::Codex
        } else {
            AppServerKind::Fake
        },
        // A declared driver chooses its own launch; the policy is only the reference driver's.
        policy: PolicyGeneration::Current,
        codex_version: codex_version.cloned(),
        plays: None,
        driver_cmd: None,
        declared: Some(driver.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_version;

    /// A version names folders (`drift-VERSION`, the cache's install): nothing that climbs out
    /// of them, nothing npm would not publish.
    #[test]
    fn a_version_is_major_minor_patch_with_an_optional_prerelease_and_never_a_path() {
        for good in ["0.171.0", "1.2.3-alpha.1", "0.172.0-rc-2"] {
            assert_eq!(check_version(good), Ok(()), "{good}");
        }
        for bad in [
            "../../x",
            "0.1.0-..",
            "0.1.0-a/b",
            "0.1.0-.a",
            "0.1.0-a.",
            "0.1",
            "0.1.0/..",
            "",
            "latest",
            "0.1.0-",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }
}
