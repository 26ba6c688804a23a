//! Which cases a declared driver cannot express. Such a cell is not applicable, with the reason:
//! never run, never a pass, never dropped from the matrix.

use crate::cell::Cell;
use crate::spec::{DeclaredDriver, DriverContract};

/// Why `cell`'s declared driver cannot run its case, if it cannot. Cells of the harness's own
/// drivers are always applicable.
pub fn not_applicable(cell: &Cell) -> Option<String> {
    let Some(driver) = cell.runner.declared.as_ref() else {
        // The harness's own drivers take every task; what they declare still decides the
        // cases that need a declaration.
        let own = DeclaredDriver::harness_own(String::new());
        if let Some(asked) = cell.case.task.get("approvals").and_then(|v| v.as_str()) {
            return Some(format!(
                "the case has escalations answered as `{asked}`, and the harness's own drivers answer approval requests their own way (they refuse a task that names approvals)"
            ));
        }
        return cell
            .case
            .requires
            .iter()
            .find(|c| !own.declares(**c))
            .map(|missing| {
                format!(
                    "the case needs the driver to declare {}, and the harness's own driver does not (yet)",
                    missing.declaration()
                )
            });
    };
    if let Some(why) = untold_choice(cell, driver) {
        return Some(why);
    }
    let task = &cell.case.task;
    if !driver.modes.contains(&cell.case.mode) {
        let declared: Vec<&str> = driver.modes.iter().map(|m| m.as_str()).collect();
        return Some(format!(
            "the case runs in mode `{}` and the driver declares only modes = [{}]",
            cell.case.mode.as_str(),
            declared.join(", ")
        ));
    }
    let revises = task
        .get("plan_reviews")
        .and_then(|v| v.as_array())
        .is_some_and(|reviews| {
            reviews
                .iter()
                .any(|r| r.get("decision").and_then(|d| d.as_str()) == Some("revise"))
        });
    if revises && !takes_plan_reviews(driver) {
        return Some(
            "the case sends a plan back for revision (a plan review loop) and the driver declares no `plan_reviews = true`"
                .into(),
        );
    }
    let answers = task
        .get("answers")
        .and_then(|v| v.as_array())
        .is_some_and(|a| !a.is_empty());
    if answers && !takes_answers(driver) {
        return Some(
            "the case answers the model's questions from the task and the driver declares no `answers = true`"
                .into(),
        );
    }
    if let Some(asked) = task.get("approvals").and_then(|v| v.as_str()) {
        if !driver.approvals.iter().any(|a| a.name() == asked) {
            let declared: Vec<&str> = driver.approvals.iter().map(|a| a.name()).collect();
            return Some(format!(
                "the case has escalations answered as `{asked}` and the driver declares only approvals = [{}]",
                declared.join(", ")
            ));
        }
    }
    if let Some(missing) = cell.case.requires.iter().find(|c| !driver.declares(**c)) {
        return Some(format!(
            "the case needs the driver to declare {} in its drivers file, and it does not",
            missing.declaration()
        ));
    }
    for (key, what) in [
        ("workspace", "names its own workspace"),
        ("context", "sets the runner contract's context boundary"),
    ] {
        if task.contains_key(key) && driver.contract != DriverContract::Events {
            return Some(format!(
                "the case {what} in the task (`{key}`), which a driver learns only from the task envelope of the events contract"
            ));
        }
    }
    if task.contains_key("relaunch") && driver.contract != DriverContract::Events {
        return Some(
            "the case relaunches the app-server under other launch rules (`relaunch`), which a driver learns only from the task envelope of the events contract"
                .into(),
        );
    }
    None
}

/// Why a driver cannot be held to the task choice its case checks: it is never told it.
fn untold_choice(cell: &Cell, driver: &DeclaredDriver) -> Option<String> {
    use graders::grade::TaskChoice;
    let choice = graders::grade::task_choice(&cell.id.suite, cell.grader_case())?;
    if driver.contract == DriverContract::Events {
        // The events contract's environment and task envelope say the workspace and the mode.
        return None;
    }
    let names = |placeholder: &str| {
        driver.command.contains(placeholder) || driver.env.values().any(|v| v.contains(placeholder))
    };
    match choice {
        TaskChoice::Workspace if !names("{workspace}") => Some(
            "the case checks the thread's working folder against the task's workspace, and the driver is never told it: its command line and environment name no `{workspace}`"
                .into(),
        ),
        TaskChoice::Mode if !names("{mode}") && !names("{task}") => Some(
            "the case checks what the driver sends for the task's mode, and the driver is never told it: its command line and environment name neither `{mode}` nor `{task}` (the task envelope)"
                .into(),
        ),
        TaskChoice::Model if !names("{model}") => Some(
            "the case checks the model the driver runs against the task's, and the driver is never told it: its command line and environment name no `{model}`"
                .into(),
        ),
        _ => None,
    }
}

/// A driver under the events contract reads the task envelope, which carries the reviews.
fn takes_plan_reviews(driver: &DeclaredDriver) -> bool {
    driver.plan_reviews || driver.contract == DriverContract::Events
}

fn takes_answers(driver: &DeclaredDriver) -> bool {
    driver.answers || driver.contract == DriverContract::Events
}

/// What a declared driver's declarations make of a case it can run, when they change what
/// passes: kept in the cell's expectation (`Expectation::declarations`) and said beside it by
/// `harness run --list` and every report, so a driver's author knows which declaration a cell
/// is graded with.
pub fn graded_with(cell: &Cell) -> Option<String> {
    let driver = cell.runner.declared.as_ref()?;
    let bytes = graders::grade::legal_line_bytes(&cell.id.suite, cell.grader_case())?;
    // The case's size is the line's text; its JSON framing adds a little.
    Some(match driver.max_line_bytes {
        Some(bound) if bound < bytes => format!(
            "its line of over {bytes} bytes is above the declared max_line_bytes = {bound}: the driver ending the run on its own with a non-zero status passes too, a hang does not"
        ),
        Some(bound) => format!(
            "its line of a little over {bytes} bytes is graded against the declared max_line_bytes = {bound}: within it the session must go on, above it the driver may instead end the run on its own with a non-zero status"
        ),
        None => format!(
            "the driver declares no max_line_bytes, so its line of over {bytes} bytes must work (declare the longest line the driver reads, if it has a bound)"
        ),
    })
}
