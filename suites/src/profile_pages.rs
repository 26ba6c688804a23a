//! The pages of docs/profiles/: each lists its profile's suites and cases with the obligation
//! and source each case's `about` names. The case tables are generated from suites.toml (a test
//! holds each page to them), so a page cannot drift from what runs.

use crate::spec::{Profile, SuitesFile};
use std::fmt::Write;

/// Where the generated part of a page starts and ends.
pub(crate) const BEGIN: &str = "<!-- cases: generated from suites/suites.toml by `UPDATE_PROFILE_PAGES=1 cargo test -p suites --lib profile_pages`; do not edit by hand -->";
pub(crate) const END: &str = "<!-- end of the generated cases -->";

/// The generated tables of `profile`: a section per suite, a row per case.
pub(crate) fn cases_of(file: &SuitesFile, profile: Profile) -> String {
    let mut out = String::new();
    for (suite_name, suite) in file.suites.iter().filter(|(_, s)| s.profile == profile) {
        let _ = writeln!(out, "### `{suite_name}`\n\n{}\n", suite.about);
        let _ = writeln!(
            out,
            "| case | obligation and source | needs |\n| --- | --- | --- |"
        );
        for (case_name, case) in &suite.cases {
            let needs: Vec<String> = case
                .requires
                .iter()
                .map(|c| format!("`{}`", c.declaration()))
                .collect();
            let graded_as = case
                .grade_as
                .as_deref()
                .map(|g| format!(" (graded as `{g}`)"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| `{case_name}`{graded_as} | {} | {} |",
                case.about.replace('|', "\\|"),
                if needs.is_empty() {
                    "—".to_string()
                } else {
                    needs.join(", ")
                }
            );
        }
        out.push('\n');
    }
    out
}

/// `page` with its generated part replaced by `cases`; `None` when the markers are missing.
pub(crate) fn with_cases(page: &str, cases: &str) -> Option<String> {
    let start = page.find(BEGIN)? + BEGIN.len();
    let end = page[start..].find(END)? + start;
    Some(format!("{}\n\n{}{}", &page[..start], cases, &page[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_page_lists_exactly_its_cases() {
        let file: SuitesFile = toml::from_str(crate::source::shipped().suites).unwrap();
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/profiles");
        for profile in Profile::ALL {
            let path = docs.join(format!("{}.md", profile.as_str()));
            let page = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let wanted = with_cases(&page, &cases_of(&file, profile))
                .unwrap_or_else(|| panic!("{} lacks the markers {BEGIN} … {END}", path.display()));
            if std::env::var_os("UPDATE_PROFILE_PAGES").is_some() {
                std::fs::write(&path, &wanted).unwrap();
            } else {
                assert!(
                    page == wanted,
                    "{} is out of date with suites.toml: run UPDATE_PROFILE_PAGES=1 cargo test -p suites --lib profile_pages and review the diff",
                    path.display()
                );
            }
        }
    }
}
