//! `harness mutate --fidelity`: each operator's status against the fake and against the real
//! Codex, for one driver (a fake runner and its real-Codex counterpart, as
//! `crate::fidelity::is_fake_counterpart` pairs them) over the cells they pair. Killed on one
//! side and survived on the other is a finding about the fake: it answers that driver bug
//! otherwise than Codex does. See docs/mutate.md.

use super::{CellMutant, DriverMutants, Status};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct FidelityChecked {
    pub pairs: Vec<[String; 2]>,
    pub findings: Vec<Disagreement>,
}

/// One operator killed against one app-server and survived against the other, for the same
/// driver over the same paired cells: the fake does not answer that bug as the real Codex does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    pub(crate) operator: String,
    /// The fake runner and the real-Codex one.
    pub(crate) fake: String,
    pub(crate) real: String,
    pub(crate) fake_status: Status,
    pub(crate) real_status: Status,
    /// The cells that killed it on the side where it was killed (with first kill: the first).
    pub(crate) killed_by: Vec<CellMutant>,
    /// The cells it applied in without an outcome changing, on the side where it survived.
    pub(crate) survived_in: Vec<String>,
}

impl Disagreement {
    pub(crate) fn describe(&self) -> String {
        let (killed, survived) = if self.fake_status == Status::Killed {
            (&self.fake, &self.real)
        } else {
            (&self.real, &self.fake)
        };
        let killers: Vec<String> = self.killed_by.iter().map(CellMutant::describe).collect();
        format!(
            "fidelity finding about the fake: `{}` is killed on {killed} by {} but survives on {survived} (applied in {}, no outcome changed)",
            self.operator,
            killers.join(", "),
            self.survived_in.join(", ")
        )
    }
}

/// Per operator, each `[fake, real]` pair of drivers where one killed it and the other let it
/// survive — confirmed statuses only (a kill whose second run killed too). Not applicable on a
/// side is no disagreement: the operator found nothing to rewrite there, so that side says
/// nothing about it; nor is unsteady, which is no status to compare (the run reports it and
/// fails on it).
pub fn disagreements(drivers: &[DriverMutants], pairs: &[[String; 2]]) -> Vec<Disagreement> {
    let find = |name: &str| drivers.iter().find(|d| d.driver == name);
    let mut out = Vec::new();
    for [fake, real] in pairs {
        let (Some(fake_driver), Some(real_driver)) = (find(fake), find(real)) else {
            continue;
        };
        for on_fake in &fake_driver.operators {
            let Some(on_real) = real_driver
                .operators
                .iter()
                .find(|m| m.operator == on_fake.operator)
            else {
                continue;
            };
            let (killed, survived) = match (on_fake.status, on_real.status) {
                (Status::Killed, Status::Survived) => (on_fake, on_real),
                (Status::Survived, Status::Killed) => (on_real, on_fake),
                _ => continue,
            };
            out.push(Disagreement {
                operator: on_fake.operator.clone(),
                fake: fake.clone(),
                real: real.clone(),
                fake_status: on_fake.status,
                real_status: on_real.status,
                killed_by: killed.killed_by.clone(),
                survived_in: survived.applied_in.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::tests::cell;
    use crate::mutate::Mutant;
    use std::collections::BTreeSet;
    use tap::mutation::Operator;

    #[test]
    fn killed_on_one_app_server_and_survived_on_the_other_is_a_finding_about_the_fake() {
        let steady = BTreeSet::new();
        let driver = |name: &str, duplicate_kills: bool| {
            let on_turn = cell(
                &format!("s.{name}.local.c"),
                2,
                "pass",
                if duplicate_kills {
                    "incomplete"
                } else {
                    "pass"
                },
            );
            DriverMutants::new(
                name,
                1,
                vec![
                    Mutant::judge(
                        Operator::DuplicateRequests,
                        vec![on_turn],
                        Vec::new(),
                        &steady,
                    ),
                    Mutant::judge(
                        Operator::DropAnswers,
                        vec![cell(
                            &format!("s.{name}.local.c"),
                            1,
                            "pass",
                            "fail: answered",
                        )],
                        Vec::new(),
                        &steady,
                    ),
                    Mutant::judge(Operator::ExitZero, Vec::new(), Vec::new(), &steady),
                ],
            )
        };
        let drivers = [driver("mini-fake", false), driver("mini-codex", true)];
        let pairs = [["mini-fake".to_string(), "mini-codex".to_string()]];
        let found = disagreements(&drivers, &pairs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].operator, "duplicate-requests");
        assert_eq!(found[0].fake_status, Status::Survived);
        let said = found[0].describe();
        assert!(
            said.contains(
                "killed on mini-codex by s.mini-codex.local.c (pass → incomplete, again incomplete)"
            )
                && said.contains("survives on mini-fake (applied in s.mini-fake.local.c"),
            "{said}"
        );
        let agreeing = [driver("mini-fake", true), driver("mini-codex", true)];
        assert!(disagreements(&agreeing, &pairs).is_empty());
        // A kill on the real Codex that its second run did not reproduce is no confirmed
        // status: nothing to compare (the run reports it as unsteady).
        let mut flaky = driver("mini-codex", true);
        let duplicate = &mut flaky.operators[0];
        let mut cells = duplicate.killed_by.clone();
        cells[0].again.as_mut().unwrap().mutant = Some("pass".into());
        *duplicate = Mutant::judge(Operator::DuplicateRequests, cells, Vec::new(), &steady);
        assert_eq!(duplicate.status, Status::Unsteady);
        let unsteady = [driver("mini-fake", false), flaky];
        assert!(disagreements(&unsteady, &pairs).is_empty());
    }
}
