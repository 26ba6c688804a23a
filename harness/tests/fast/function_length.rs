//! No function of the workspace is longer than 100 lines unless its doc comment says why
//! (issue 40): a long function does several things one after another, and is read, reviewed and
//! changed as one piece; it is split by what it dispatches on (a group of match arms, a phase),
//! or its doc comment says why it stays whole (a line "Longer than 100 lines on purpose: …").
//!
//! A function's length is counted as file_length counts a file's: every line, from the line of
//! its `fn` to the line of its body's closing brace. Test code is left out: the files under a
//! `tests` or `benches` folder, the files of `#[cfg(test)] mod NAME;` declarations, and the items
//! under `#[cfg(test)]` or `#[test]`. The source is read as tokens (proc-macro2), so comments
//! and strings hold no functions and a doc comment is the item's `doc` attributes.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::file_length::rust_files;
use crate::layers::workspace_root;
use crate::module_cycles::{attribute, end_of_item};
use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The bound, in lines.
const MAX_LINES: usize = 100;

/// What a doc comment says of a function that stays long on purpose, followed by why.
const REASON: &str = "Longer than 100 lines on purpose:";

/// A function over the bound.
#[derive(Debug, PartialEq)]
struct Long {
    name: String,
    line: usize,
    lines: usize,
    /// Whether its doc comment says why it is long.
    explained: bool,
}

/// Whether an attribute's contents (spaces removed) make its item test code.
fn is_test_attribute(contents: &str) -> bool {
    contents == "test"
        || contents.ends_with("::test")
        || contents == "cfg(test)"
        || contents.starts_with("cfg(all(test,")
}

/// Whether an attribute's contents (a doc comment's line) say why the function is long: the
/// reason phrase with words after it.
fn says_why(doc: &str) -> bool {
    // The attribute's contents come without spaces (`module_cycles::attribute`).
    doc.split(&REASON.replace(' ', ""))
        .nth(1)
        .is_some_and(|after| {
            after
                .trim_start()
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric)
        })
}

/// The functions over the bound in `tokens`, at any depth (impl blocks, modules, bodies),
/// test items left out.
fn long_functions(tokens: &[TokenTree], found: &mut Vec<Long>) {
    let mut docs: Vec<String> = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        if let Some(contents) = attribute(tokens, at) {
            at += 2;
            if is_test_attribute(&contents) {
                // The attributes after it belong to the same item.
                while attribute(tokens, at).is_some() {
                    at += 2;
                }
                at = end_of_item(tokens, at);
                docs.clear();
            } else {
                docs.push(contents);
            }
            continue;
        }
        match &tokens[at] {
            TokenTree::Ident(keyword) if keyword == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(at + 1) {
                    let mut end = at + 2;
                    while end < tokens.len() {
                        match &tokens[end] {
                            TokenTree::Punct(p) if p.as_char() == ';' => break,
                            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => break,
                            _ => end += 1,
                        }
                    }
                    if let Some(TokenTree::Group(body)) = tokens.get(end) {
                        let line = keyword.span().start().line;
                        let lines = body.span().end().line - line + 1;
                        if lines > MAX_LINES {
                            found.push(Long {
                                name: name.to_string(),
                                line,
                                lines,
                                explained: docs.iter().any(|doc| says_why(doc)),
                            });
                        }
                    }
                }
                docs.clear();
            }
            // `pub(crate)`: still the item's qualifiers.
            TokenTree::Group(group)
                if group.delimiter() == Delimiter::Parenthesis
                    && at > 0
                    && matches!(&tokens[at - 1], TokenTree::Ident(word) if word == "pub") => {}
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                long_functions(&inner, found);
                docs.clear();
            }
            // The qualifiers between an item's attributes and its `fn`.
            TokenTree::Ident(word)
                if ["pub", "async", "const", "unsafe", "extern", "default"]
                    .contains(&word.to_string().as_str()) => {}
            TokenTree::Literal(_) => {}
            TokenTree::Punct(p) if p.as_char() == '#' => {}
            _ => docs.clear(),
        }
        at += 1;
    }
}

/// The long functions of one file's source.
fn long_functions_of(text: &str) -> Result<Vec<Long>, String> {
    let tokens: Vec<TokenTree> = TokenStream::from_str(text)
        .map_err(|error| format!("does not tokenize: {error}"))?
        .into_iter()
        .collect();
    let mut found = Vec::new();
    long_functions(&tokens, &mut found);
    Ok(found)
}

/// The files of the `#[cfg(test)] mod NAME;` declarations in `file` (a `#[path]` or `NAME`'s
/// file and folder), read from its text.
fn test_module_files(file: &Path, text: &str) -> Vec<PathBuf> {
    let Ok(stream) = TokenStream::from_str(text) else {
        return Vec::new();
    };
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    // A file's child modules sit in the folder of its name (`mod.rs`, `lib.rs`, `main.rs`: its
    // own folder); a `#[path]` is relative to the file's folder.
    let folder = file.parent().unwrap();
    let own_folder = ["mod.rs", "lib.rs", "main.rs"]
        .iter()
        .any(|name| file.ends_with(name));
    let children = if own_folder {
        folder.to_path_buf()
    } else {
        folder.join(file.file_stem().unwrap())
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        let Some(first) = attribute(&tokens, at) else {
            at += 1;
            continue;
        };
        let mut attributes = vec![first];
        at += 2;
        while let Some(more) = attribute(&tokens, at) {
            attributes.push(more);
            at += 2;
        }
        if !attributes.iter().any(|a| a == "cfg(test)") {
            continue;
        }
        let path = attributes
            .iter()
            .find_map(|a| a.strip_prefix("path="))
            .map(|p| p.trim_matches('"').to_string());
        if let (Some(TokenTree::Ident(keyword)), Some(TokenTree::Ident(name))) =
            (tokens.get(at), tokens.get(at + 1))
        {
            if keyword == "mod" {
                match path {
                    Some(path) => found.push(folder.join(path)),
                    None => {
                        found.push(children.join(format!("{name}.rs")));
                        found.push(children.join(name.to_string()));
                    }
                }
            }
        }
    }
    found
}

/// Whether `file` (relative to the workspace's root) is test code by its place.
fn in_test_folder(file: &Path) -> bool {
    file.components()
        .any(|part| part.as_os_str() == "tests" || part.as_os_str() == "benches")
}

#[test]
fn no_function_is_over_100_lines_without_saying_why_in_its_doc_comment() {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file.strip_prefix(&root).unwrap().to_path_buf(), text)
        })
        .filter(|(file, _)| !in_test_folder(file))
        .collect();
    assert!(
        sources.len() > 100,
        "found only {} .rs files under {}",
        sources.len(),
        root.display()
    );
    let test_files: Vec<PathBuf> = sources
        .iter()
        .flat_map(|(file, text)| test_module_files(file, text))
        .collect();
    let mut problems = Vec::new();
    for (file, text) in &sources {
        if test_files.iter().any(|test| file.starts_with(test)) {
            continue;
        }
        let shown = file.display().to_string();
        let long = match long_functions_of(text) {
            Ok(long) => long,
            Err(why) => {
                problems.push(format!("{shown}: {why}"));
                continue;
            }
        };
        for Long {
            name,
            line,
            lines,
            explained,
        } in long
        {
            if explained {
                continue;
            }
            problems.push(format!(
                "{shown}:{line}: fn {name} is {lines} lines; split it by what it dispatches on (a group of match arms, a phase), or say why in its doc comment (\"{REASON} …\")"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The reading itself: lines from `fn` to the closing brace; a reason in the doc comment
/// counts, one elsewhere does not; test items and nested functions are read as they are.
#[test]
fn the_rule_counts_a_functions_lines_and_reads_its_doc_comment() {
    let body = |lines: usize| "    let _ = 1;\n".repeat(lines);
    // `fn` line + body + closing brace: exactly the bound, then one over.
    let at_bound = format!("fn f() {{\n{}}}\n", body(MAX_LINES - 2));
    assert_eq!(long_functions_of(&at_bound).unwrap(), vec![]);
    let over = format!(
        "/// A function.\npub(crate) async fn f() {{\n{}}}\n",
        body(MAX_LINES - 1)
    );
    let found = long_functions_of(&over).unwrap();
    assert_eq!(
        found,
        vec![Long {
            name: "f".into(),
            line: 2,
            lines: MAX_LINES + 1,
            explained: false
        }]
    );
    let explained = format!(
        "/// A table.\n/// {REASON} one literal per row.\n#[must_use]\npub fn f() {{\n{}}}\n",
        body(MAX_LINES)
    );
    assert!(long_functions_of(&explained).unwrap()[0].explained);
    // The phrase without a reason, or in a comment inside the body, does not count.
    let bare = format!("/// {REASON}\nfn f() {{\n{}}}\n", body(MAX_LINES));
    assert!(!long_functions_of(&bare).unwrap()[0].explained);
    let buried = format!("fn f() {{\n    // {REASON} no.\n{}}}\n", body(MAX_LINES));
    assert!(!long_functions_of(&buried).unwrap()[0].explained);
    // A method in an impl block, and a function inside another, are read; their doc too.
    let method = format!(
        "impl S {{\n    /// {REASON} one match.\n    fn m(&self) {{\n{}    }}\n    fn n() {{\n{}    }}\n}}\n",
        body(MAX_LINES),
        body(MAX_LINES)
    );
    let found = long_functions_of(&method).unwrap();
    assert_eq!(
        found
            .iter()
            .map(|l| (l.name.as_str(), l.explained))
            .collect::<Vec<_>>(),
        vec![("m", true), ("n", false)]
    );
    // Test code is left out; a signature without a body is no function to count.
    let tests = format!(
        "#[cfg(test)]\nmod tests {{\n    fn helper() {{\n{}    }}\n}}\n#[test]\nfn t() {{\n{}}}\ntrait T {{ fn g(&self); }}\n",
        body(MAX_LINES),
        body(MAX_LINES)
    );
    assert_eq!(long_functions_of(&tests).unwrap(), vec![]);
    // Strings and comments hold no functions.
    let quoted = format!("const S: &str = \"fn f() {{\n{}}}\";\n", body(MAX_LINES));
    assert_eq!(long_functions_of(&quoted).unwrap(), vec![]);
}

#[test]
fn test_module_files_are_found_by_name_and_by_path() {
    let text =
        "#[cfg(test)]\nmod tests;\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod other;\nmod kept;\n";
    assert_eq!(
        test_module_files(Path::new("a/src/x.rs"), text),
        vec![
            PathBuf::from("a/src/x/tests.rs"),
            PathBuf::from("a/src/x/tests"),
            PathBuf::from("a/src/x_tests.rs"),
        ]
    );
    assert_eq!(
        test_module_files(Path::new("a/src/lib.rs"), "#[cfg(test)] mod t;"),
        vec![PathBuf::from("a/src/t.rs"), PathBuf::from("a/src/t")]
    );
}
