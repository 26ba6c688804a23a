//! The mutation a cell's driver runs under (`harness mutate`, docs/mutate.md): the one place of
//! the matrix that knows the operators (`tap::mutation`). The context holds a run's
//! [`Mutation`]; the driver stage makes it the cell's, once, knowing the declared driver
//! ([`Mutation::for_driver`]), and the stages ask that value what to hand the recorder (which
//! applies the wire's operators: `tap::session`) and how to read the driver's end (`exit-zero`,
//! the one operator off the wire). The scheduler and the rest of the pipeline know nothing of it.

use graders::events::OutcomeDeclaration;
use graders::wire::DriverEnd;
use suites::spec::DeclaredDriver;
use tap::mutation::Operator;
use tap::session::Recording;

/// The mutation operator every cell of a run is run under; none (the default): the driver as it
/// is, its bytes relayed untouched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutation {
    operator: Option<Operator>,
}

impl Mutation {
    /// Every cell's driver run under `operator`.
    pub fn of(operator: Operator) -> Mutation {
        Mutation {
            operator: Some(operator),
        }
    }

    /// The mutation of one cell whose driver is `declared`.
    pub(crate) fn for_driver(self, declared: &DeclaredDriver) -> CellMutation {
        CellMutation {
            operator: self.operator,
            exit_zero: self.operator == Some(Operator::ExitZero)
                && declared.outcome == Some(OutcomeDeclaration::ExitStatus),
        }
    }
}

/// One cell's mutation, as its stages apply it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellMutation {
    operator: Option<Operator>,
    /// `exit-zero` applies: the driver's outcome is its exit status.
    exit_zero: bool,
}

impl CellMutation {
    /// What the recorder is handed (`tap::session::Options::mutation`): it rewrites what the
    /// driver sends by the operators of the wire, and leaves the rest alone.
    pub(crate) fn for_the_recorder(self) -> Option<Operator> {
        self.operator
    }

    /// How the driver's `end` is read: under `exit-zero`, a non-zero exit status is taken as 0 —
    /// recorded in `recording`'s transcript, which must still be open.
    pub(crate) fn driver_end(self, recording: &Recording, end: DriverEnd) -> DriverEnd {
        match end {
            DriverEnd::Exited { code } if code != 0 && self.exit_zero => {
                recording.record_mutation(
                    Operator::ExitZero,
                    &format!("the driver exited with status {code}"),
                    "exit status 0",
                );
                DriverEnd::Exited { code: 0 }
            }
            end => end,
        }
    }
}
