//! What a cell's case checks, for its page: the case's and its suite's `about` from the suites
//! the harness ships, and where the profile's page lists the case (docs/profiles/, generated from
//! the same `about`s: the protocol clause or schema type, and its source).

use serde::Serialize;
use std::sync::OnceLock;
use suites::spec::{Profile, SuitesFile};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseAbout {
    /// The suite's `about`.
    pub suite: String,
    /// The case's `about`: the clause or schema type it checks, and its source.
    pub case: String,
    /// The profile page's section listing the case, from the repository's root
    /// (`docs/profiles/protocol.md#protocol-handshake`).
    pub page: String,
}

fn shipped() -> Option<&'static SuitesFile> {
    static FILE: OnceLock<Option<SuitesFile>> = OnceLock::new();
    FILE.get_or_init(|| suites::load().ok().map(|matrix| matrix.file))
        .as_ref()
}

/// The `about` of `suite`'s `case`; `None` for a suite or case the shipped suites do not hold.
pub(super) fn of(suite: &str, case: &str) -> Option<CaseAbout> {
    let spec = shipped()?.suites.get(suite)?;
    let case_spec = spec.cases.get(case)?;
    let page = match spec.profile {
        Profile::Protocol => "protocol",
        Profile::RunnerContract => "runner-contract",
    };
    Some(CaseAbout {
        suite: spec.about.clone(),
        case: case_spec.about.clone(),
        // GitHub's anchor of the heading "### `suite`".
        page: format!("docs/profiles/{page}.md#{suite}"),
    })
}

/// Where the repository's files are browsed, for links from the page: the run's repository and
/// commit on GitHub Actions; `None` elsewhere (the page then names the paths).
pub(super) fn repository_base(var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let var = |name: &str| var(name).filter(|v| !v.is_empty());
    Some(format!(
        "{}/{}/blob/{}/",
        var("GITHUB_SERVER_URL")?,
        var("GITHUB_REPOSITORY")?,
        var("GITHUB_SHA").unwrap_or_else(|| "HEAD".into())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_case_names_what_it_checks_and_its_profile_page() {
        let about = of("protocol-forward-compat", "unknown-notification").unwrap();
        assert_eq!(
            about.case,
            "a notification of a method no release has is ignored"
        );
        assert_eq!(
            about.page,
            "docs/profiles/protocol.md#protocol-forward-compat"
        );
        assert!(of("protocol-forward-compat", "no-such-case").is_none());
        assert_eq!(
            repository_base(|name| match name {
                "GITHUB_SERVER_URL" => Some("https://github.com".into()),
                "GITHUB_REPOSITORY" => Some("o/r".into()),
                _ => None,
            })
            .as_deref(),
            Some("https://github.com/o/r/blob/HEAD/")
        );
        assert_eq!(repository_base(|_| None), None);
    }
}
