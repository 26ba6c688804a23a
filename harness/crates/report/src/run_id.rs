//! The run id of this process, which binds what the run writes to it: every verdict it writes
//! (`crate::binding`) and its `summary.json` (`crate::summary`) carry it. Apart from both, so
//! the summary names its run without depending on the verdict's binding.

use std::sync::OnceLock;

/// The run id of this process: one per `harness run` or test-binary process.
pub(crate) fn this_run() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| uuid::Uuid::new_v4().to_string())
}
