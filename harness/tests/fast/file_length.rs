//! No source file of the workspace is longer than 700 lines unless its header says why
//! (issue 40): a long file is read, reviewed and merged as one piece, so one that grows past
//! the bound is split by what it holds, or says in its opening comment why it stays whole
//! (a line such as "Longer than 600 lines on purpose: …").

use std::path::{Path, PathBuf};

use crate::layers::workspace_root;

/// The bound, in lines.
const MAX_LINES: usize = 700;

/// Folders of the workspace holding no source of its own.
const NOT_SOURCE: &[&str] = &["target", "node_modules"];

/// The opening comment of a file: its first lines that are comments (`//!` or `//`), blank
/// lines before them skipped.
fn header(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim_start)
        .skip_while(|line| line.is_empty())
        .take_while(|line| line.starts_with("//"))
}

/// Whether a header line says why the file is long: "Longer than N lines".
fn says_why_it_is_long(line: &str) -> bool {
    line.split("Longer than ").skip(1).any(|after| {
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        digits > 0 && after[digits..].starts_with(" lines")
    })
}

/// `Some(lines)` when `text` is over the bound and its header does not say why.
fn unexplained_length(text: &str) -> Option<usize> {
    let lines = text.lines().count();
    (lines > MAX_LINES && !header(text).any(says_why_it_is_long)).then_some(lines)
}

pub(crate) fn rust_files(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && !NOT_SOURCE.contains(&name.as_str()) {
                rust_files(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_file_is_over_700_lines_without_saying_why_in_its_header() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(
        files.len() > 100,
        "found only {} .rs files under {}",
        files.len(),
        root.display()
    );
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Some(lines) = unexplained_length(&text) {
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            problems.push(format!(
                "{shown}: {lines} lines; split it by what it holds, or say why in its header (\"Longer than {MAX_LINES} lines on purpose: …\")"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_rule_reads_the_header_only_and_counts_lines() {
    let body = "fn f() {}\n".repeat(MAX_LINES);
    // At the bound exactly: fine.
    assert_eq!(unexplained_length(&body), None);
    let long = format!("//! A module.\n{body}");
    assert_eq!(unexplained_length(&long), Some(MAX_LINES + 1));
    let explained =
        format!("//! A module.\n//! Longer than 600 lines on purpose: one table.\n{body}");
    assert_eq!(unexplained_length(&explained), None);
    // A reason below the header does not count.
    let buried = format!("//! A module.\n{body}// Longer than 600 lines on purpose.\n");
    assert_eq!(unexplained_length(&buried), Some(MAX_LINES + 2));
    // Nor does a phrase that names no length in lines.
    let vague = format!("//! Longer than [`MAX`]: its length only.\n{body}");
    assert_eq!(unexplained_length(&vague), Some(MAX_LINES + 1));
}
