//! The one rule every name that becomes part of a cell name obeys.

use crate::SuitesError;

/// A suite, runner, environment, case or driver name is one dot-free part of a cell name:
/// non-empty lowercase kebab-case.
pub(crate) fn check_name(file: &str, what: &'static str, name: &str) -> Result<(), SuitesError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(SuitesError::BadName {
            file: file.to_string(),
            what,
            name: name.to_string(),
        })
    }
}
