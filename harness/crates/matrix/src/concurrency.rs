//! How many cells run at once.
//!
//! A fake cell spends its time waiting: on process start-up, on pipes, on the fake's scripted
//! pauses and a driver's bounded waits (`harness bench matrix`: median 155 ms per cell, the whole
//! fake matrix under one core's worth of CPU at 2 cells at a time). A real-Codex cell keeps a core
//! busy (Codex, its sandbox helpers, the mock model API). So by default cells are weighed: a core
//! takes one real-Codex cell or [`FAKE_CELLS_PER_CORE`] fake cells. `--jobs N` still means what it
//! says: at most N cells, whatever they are.

use suites::spec::AppServerKind;
use suites::Cell;

/// Fake cells that share one core by default. Measured with `harness bench matrix --jobs
/// 2,4,8` on 2 cores: 12.1 s at 2 cells at once, 7.1 s at 4, 8.5 s at 8 (a fake cell still
/// burns ~40–90 ms of CPU in its processes: past 2 per core they queue for the CPU).
pub(crate) const FAKE_CELLS_PER_CORE: u32 = 2;

/// A default for `--jobs`: the machine's parallelism.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// `--jobs N`: at most N cells at once.
    Cells(usize),
    /// The default: `cores` cores, each taking one real-Codex cell or [`FAKE_CELLS_PER_CORE`]
    /// fake cells.
    Weighed { cores: usize },
}

impl Concurrency {
    /// The default for this machine.
    pub fn weighed() -> Self {
        Concurrency::Weighed {
            cores: default_jobs(),
        }
    }

    /// `--jobs N` if given, else [`Concurrency::weighed`].
    pub fn from_jobs(jobs: Option<usize>) -> Self {
        jobs.map_or_else(Self::weighed, |n| Concurrency::Cells(n.max(1)))
    }

    /// The permits shared by all cells.
    pub(crate) fn slots(&self) -> u32 {
        match *self {
            Concurrency::Cells(n) => n.max(1) as u32,
            Concurrency::Weighed { cores } => cores.max(1) as u32 * FAKE_CELLS_PER_CORE,
        }
    }

    /// The permits `cell` holds while it runs (never more than [`Concurrency::slots`]).
    pub(crate) fn cost(&self, cell: &Cell) -> u32 {
        match *self {
            Concurrency::Cells(_) => 1,
            Concurrency::Weighed { .. } => match cell.runner.app_server {
                AppServerKind::Fake => 1,
                AppServerKind::Codex => FAKE_CELLS_PER_CORE,
            },
        }
    }

    pub fn describe(&self) -> String {
        match *self {
            Concurrency::Cells(n) => format!("{n} at a time"),
            Concurrency::Weighed { cores } => format!(
                "{} fake or {cores} real-Codex cells at a time",
                cores as u32 * FAKE_CELLS_PER_CORE
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_of(app_server: &str) -> Cell {
        let matrix = suites::load().expect("the shipped suites load");
        matrix
            .cells
            .iter()
            .find(|c| {
                matches!(
                    (&c.runner.app_server, app_server),
                    (AppServerKind::Fake, "fake") | (AppServerKind::Codex, "codex")
                )
            })
            .cloned()
            .expect("a cell of that kind")
    }

    #[test]
    fn a_real_codex_cell_takes_a_core_and_a_fake_cell_a_share_of_one() {
        let weighed = Concurrency::Weighed { cores: 2 };
        assert_eq!(weighed.slots(), 2 * FAKE_CELLS_PER_CORE);
        assert_eq!(weighed.cost(&cell_of("fake")), 1);
        assert_eq!(weighed.cost(&cell_of("codex")), FAKE_CELLS_PER_CORE);
        assert_eq!(
            weighed.describe(),
            format!(
                "{} fake or 2 real-Codex cells at a time",
                2 * FAKE_CELLS_PER_CORE
            )
        );
    }

    #[test]
    fn jobs_n_counts_cells_whatever_they_are() {
        let jobs = Concurrency::from_jobs(Some(3));
        assert_eq!(jobs.slots(), 3);
        assert_eq!(jobs.cost(&cell_of("codex")), 1);
        assert_eq!(Concurrency::from_jobs(Some(0)).slots(), 1);
        assert!(matches!(
            Concurrency::from_jobs(None),
            Concurrency::Weighed { .. }
        ));
    }
}
