//! No import cycle between any workspace crate's top-level modules (issue 40): a module that
//! uses another may be used by it only through a third module both use, so each can be read,
//! moved or split without the other.
//!
//! For every crate, each top-level module (`mod X;` in `lib.rs`: `src/X.rs` and `src/X/**`) is a
//! node, and its source's `crate::Y…` paths (use statements, expressions, macro arguments) and
//! the `super::…` paths that climb to the crate's root are edges to `Y`. A name `lib.rs`
//! re-exports (`pub use Y::Item;`) counts as `Y`, so a re-export keeps no cycle hidden. The
//! source is read as tokens (proc-macro2, outside a macro), so comments and strings name
//! nothing and macro arguments are read too; the cycles are petgraph's strongly connected
//! components.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::layers::{workspace_crates, workspace_root};
use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use proc_macro2::{Delimiter, Punct, Spacing, TokenStream, TokenTree};

/// Cycles kept on purpose, each with why: (crate, the cycle's modules sorted, reason). The test
/// reports them and fails when one is gone, so the list only shrinks.
const ALLOWED_CYCLES: &[(&str, &[&str], &str)] = &[];

/// Where one module names another: the first place found.
struct Edge {
    to: String,
    at: String,
}

/// Every workspace crate's `src/` folder (relative to the workspace's root), by package name.
fn crate_sources() -> BTreeMap<String, PathBuf> {
    let root = workspace_root();
    workspace_crates()
        .into_iter()
        .map(|(name, (folder, _))| (name, folder.strip_prefix(&root).unwrap().join("src")))
        .collect()
}

fn tokens(path: &Path) -> Vec<TokenTree> {
    let text = std::fs::read_to_string(path).unwrap();
    TokenStream::from_str(&text)
        .unwrap_or_else(|error| panic!("{} does not tokenize: {error}", path.display()))
        .into_iter()
        .collect()
}

fn is_ident(token: Option<&TokenTree>, name: &str) -> bool {
    matches!(token, Some(TokenTree::Ident(ident)) if ident == name)
}

/// Whether `::` starts at `tokens[at]`.
fn is_path_sep(tokens: &[TokenTree], at: usize) -> bool {
    matches!(
        (tokens.get(at), tokens.get(at + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':'
    )
}

/// The first segment of each path that starts at `tokens[at]`: one name, or one per item of a
/// `{…}` group.
fn first_segments(tokens: &[TokenTree], at: usize) -> Vec<(String, usize)> {
    match tokens.get(at) {
        Some(TokenTree::Ident(ident)) => vec![(ident.to_string(), ident.span().start().line)],
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let inner: Vec<TokenTree> = group.stream().into_iter().collect();
            let mut found = Vec::new();
            let mut item_start = true;
            for token in &inner {
                match token {
                    TokenTree::Punct(punct) if punct.as_char() == ',' => item_start = true,
                    TokenTree::Ident(ident) if item_start => {
                        found.push((ident.to_string(), ident.span().start().line));
                        item_start = false;
                    }
                    _ => item_start = false,
                }
            }
            found
        }
        _ => Vec::new(),
    }
}

/// What one file's tokens name at the crate's root, and the test modules it declares.
#[derive(Default)]
struct FileNames {
    /// Each root name reached through `crate::` or `super::`, with its line.
    root: Vec<(String, usize)>,
    /// The files of its `#[cfg(test)] mod NAME;` declarations: `NAME` or a `#[path]`.
    test_modules: Vec<TestModule>,
}

enum TestModule {
    Named(String),
    Path(String),
}

/// Whether `tokens[at]` opens an attribute (`#[…]`), and its contents without spaces.
pub(crate) fn attribute(tokens: &[TokenTree], at: usize) -> Option<String> {
    match (tokens.get(at), tokens.get(at + 1)) {
        (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(group)))
            if hash.as_char() == '#' && group.delimiter() == Delimiter::Bracket =>
        {
            Some(group.stream().to_string().replace(' ', ""))
        }
        _ => None,
    }
}

/// The index after the `#[cfg(test)]` item whose attributes start at `at`: test code is no edge,
/// as dev-dependencies are no edge of the crates' layers (layers.rs).
fn skip_test_item(tokens: &[TokenTree], mut at: usize, names: &mut FileNames) -> usize {
    let mut path = None;
    while let Some(contents) = attribute(tokens, at) {
        if let Some(value) = contents.strip_prefix("path=") {
            path = Some(value.trim_matches('"').to_string());
        }
        at += 2;
    }
    if let (true, Some(TokenTree::Ident(name)), Some(TokenTree::Punct(end))) = (
        is_ident(tokens.get(at), "mod"),
        tokens.get(at + 1),
        tokens.get(at + 2),
    ) {
        if end.as_char() == ';' {
            names.test_modules.push(match path {
                Some(path) => TestModule::Path(path),
                None => TestModule::Named(name.to_string()),
            });
            return at + 3;
        }
    }
    end_of_item(tokens, at)
}

/// The index after the item that starts at `tokens[at]`: after its `;`, or its first `{…}`
/// group (its body).
pub(crate) fn end_of_item(tokens: &[TokenTree], mut at: usize) -> usize {
    while let Some(token) = tokens.get(at) {
        at += 1;
        match token {
            TokenTree::Punct(end) if end.as_char() == ';' => break,
            TokenTree::Group(body) if body.delimiter() == Delimiter::Brace => break,
            _ => {}
        }
    }
    at
}

/// The names of the crate's root that `tokens` (at module depth `depth`, the root being 0)
/// reaches through `crate::` or `super::`, with their lines.
fn root_names(tokens: &[TokenTree], depth: usize, names: &mut FileNames) {
    let mut at = 0;
    while at < tokens.len() {
        if attribute(tokens, at).is_some_and(|contents| contents == "cfg(test)") {
            at = skip_test_item(tokens, at, names);
            continue;
        }
        match &tokens[at] {
            TokenTree::Ident(ident) if ident == "mod" => {
                if let (Some(TokenTree::Ident(_)), Some(TokenTree::Group(body))) =
                    (tokens.get(at + 1), tokens.get(at + 2))
                {
                    if body.delimiter() == Delimiter::Brace {
                        let inner: Vec<TokenTree> = body.stream().into_iter().collect();
                        root_names(&inner, depth + 1, names);
                        at += 3;
                        continue;
                    }
                }
            }
            TokenTree::Ident(ident) if ident == "crate" && is_path_sep(tokens, at + 1) => {
                names.root.extend(first_segments(tokens, at + 3));
                at += 3;
                continue;
            }
            TokenTree::Ident(ident) if ident == "super" && is_path_sep(tokens, at + 1) => {
                let mut climbed = 0;
                while is_ident(tokens.get(at), "super") && is_path_sep(tokens, at + 1) {
                    climbed += 1;
                    at += 3;
                }
                if climbed >= depth {
                    names.root.extend(first_segments(tokens, at));
                }
                continue;
            }
            TokenTree::Group(group) => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                root_names(&inner, depth, names);
            }
            _ => {}
        }
        at += 1;
    }
}

/// `tokens` with each group's contents in its place, followed by a `,` that ends its last item.
fn flatten(tokens: &[TokenTree]) -> Vec<TokenTree> {
    let mut flat = Vec::new();
    for token in tokens {
        match token {
            TokenTree::Group(group) => {
                flat.extend(flatten(&group.stream().into_iter().collect::<Vec<_>>()));
                flat.push(TokenTree::Punct(Punct::new(',', Spacing::Alone)));
            }
            other => flat.push(other.clone()),
        }
    }
    flat
}

/// The top-level modules `lib.rs` declares, and the names it re-exports from each.
fn root_of(lib: &[TokenTree]) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut modules = BTreeSet::new();
    for (at, token) in lib.iter().enumerate() {
        if let (true, Some(TokenTree::Ident(name))) =
            (is_ident(Some(token), "mod"), lib.get(at + 1))
        {
            modules.insert(name.to_string());
        }
    }
    let mut reexports = BTreeMap::new();
    for (at, token) in lib.iter().enumerate() {
        if !is_ident(Some(token), "use") {
            continue;
        }
        let mut start = at + 1;
        if is_ident(lib.get(start), "crate") || is_ident(lib.get(start), "self") {
            start += 2;
        }
        let Some(TokenTree::Ident(module)) = lib.get(start) else {
            continue;
        };
        if !modules.contains(&module.to_string()) {
            continue;
        }
        let statement: Vec<TokenTree> = lib[start..]
            .iter()
            .take_while(|token| !matches!(token, TokenTree::Punct(p) if p.as_char() == ';'))
            .cloned()
            .collect();
        // The names the statement brings in: the last identifier of each item (an alias if any).
        let mut last = None;
        for token in flatten(&statement)
            .iter()
            .chain([&TokenTree::Punct(Punct::new(',', Spacing::Alone))])
        {
            match token {
                TokenTree::Ident(ident) => last = Some(ident.to_string()),
                TokenTree::Punct(punct) if punct.as_char() == ',' => {
                    if let Some(name) = last.take() {
                        reexports.insert(name, module.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    (modules, reexports)
}

/// Each `.rs` file of top-level module `module`, with its module depth.
fn module_files(src: &Path, module: &str) -> Vec<(PathBuf, usize)> {
    fn walk(folder: &Path, depth: usize, found: &mut Vec<(PathBuf, usize)>) {
        let Ok(entries) = std::fs::read_dir(folder) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, depth + 1, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let own = if path.ends_with("mod.rs") {
                    depth - 1
                } else {
                    depth
                };
                found.push((path, own));
            }
        }
    }
    let mut found = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        found.push((file, 1));
    }
    walk(&src.join(module), 2, &mut found);
    found
}

/// Each top-level module's edges to the others of its crate (`src` relative to `root`).
fn module_graph(root: &Path, src: &Path) -> BTreeMap<String, BTreeMap<String, Edge>> {
    let (modules, reexports) = root_of(&tokens(&root.join(src).join("lib.rs")));
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut files = BTreeMap::new();
        let mut test_files = Vec::new();
        for (file, depth) in module_files(&root.join(src), module) {
            let mut names = FileNames::default();
            root_names(&tokens(&file), depth, &mut names);
            // A file's child modules sit in the folder of its name (`mod.rs`: its own folder);
            // a `#[path]` is relative to the file's folder.
            let folder = file.parent().unwrap();
            let children = if file.ends_with("mod.rs") {
                folder.to_path_buf()
            } else {
                folder.join(file.file_stem().unwrap())
            };
            for test_module in &names.test_modules {
                match test_module {
                    TestModule::Named(name) => {
                        test_files.push(children.join(format!("{name}.rs")));
                        test_files.push(children.join(name));
                    }
                    TestModule::Path(path) => test_files.push(folder.join(path)),
                }
            }
            files.insert(file, names.root);
        }
        let mut edges: BTreeMap<String, Edge> = BTreeMap::new();
        for (file, names) in files {
            if test_files.iter().any(|test| file.starts_with(test)) {
                continue;
            }
            for (name, line) in names {
                let target = if modules.contains(&name) {
                    name
                } else if let Some(owner) = reexports.get(&name) {
                    owner.clone()
                } else {
                    continue;
                };
                if &target != module {
                    let shown = file.strip_prefix(root).unwrap_or(&file).display();
                    let at = format!("{shown}:{line}");
                    edges
                        .entry(target.clone())
                        .or_insert(Edge { to: target, at });
                }
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

/// Each cycle (strongly connected component of two or more modules), its modules sorted, with
/// the edges inside it.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, Edge>>) -> Vec<(Vec<String>, Vec<String>)> {
    let mut nodes = DiGraph::<&str, ()>::new();
    let index: BTreeMap<&str, _> = graph
        .keys()
        .map(|module| (module.as_str(), nodes.add_node(module.as_str())))
        .collect();
    for (from, edges) in graph {
        for edge in edges.values() {
            nodes.add_edge(index[from.as_str()], index[edge.to.as_str()], ());
        }
    }
    let mut found = Vec::new();
    for component in tarjan_scc(&nodes).into_iter().filter(|c| c.len() > 1) {
        let mut members: Vec<String> = component.iter().map(|n| nodes[*n].to_string()).collect();
        members.sort();
        let mut inside = Vec::new();
        for from in &members {
            for edge in graph[from].values().filter(|e| members.contains(&e.to)) {
                inside.push(format!("    {from} -> {} ({})", edge.to, edge.at));
            }
        }
        found.push((members, inside));
    }
    found.sort();
    found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_top_level_modules() {
    let mut problems = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    let root = workspace_root();
    for (name, src) in crate_sources() {
        for (members, inside) in cycles(&module_graph(&root, &src)) {
            let allowed = ALLOWED_CYCLES
                .iter()
                .find(|(krate, modules, _)| *krate == name && *modules == members.as_slice());
            let heading = format!("`{name}`: {}", members.join(", "));
            match allowed {
                Some((_, _, why)) => {
                    allowed_seen.insert((name.clone(), members.clone()));
                    eprintln!("allowed cycle {heading} ({why}):\n{}", inside.join("\n"));
                }
                None => problems.push(format!("cycle in {heading}:\n{}", inside.join("\n"))),
            }
        }
    }
    for (krate, modules, _) in ALLOWED_CYCLES {
        let modules: Vec<String> = modules.iter().map(|m| m.to_string()).collect();
        if !allowed_seen.contains(&(krate.to_string(), modules.clone())) {
            problems.push(format!(
                "ALLOWED_CYCLES names `{krate}`: {}, which is no longer a cycle: remove it",
                modules.join(", ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "move what both modules use down into one of them or a new module (docs/architecture.md):\n{}",
        problems.join("\n")
    );
}

/// The reading itself, on a crate made for it: a cycle through `super::super::` is found; a
/// root re-export counts as its module; comments, strings and test code name nothing.
#[test]
fn the_module_graph_reads_paths_not_comments_and_skips_test_code() {
    let root = tempfile::tempdir().unwrap();
    let files = [
        (
            "src/lib.rs",
            "mod a;\nmod b;\nmod c;\nmod d;\npub use d::{Other, Thing as Renamed};\n",
        ),
        (
            "src/a.rs",
            "use crate::b::X;\n// crate::c::Z\nfn f() -> &'static str { \"crate::d\" }\n",
        ),
        ("src/b/mod.rs", "mod inner;\n"),
        (
            "src/b/inner.rs",
            "fn f() { super::super::a::g(); super::here(); }\n",
        ),
        ("src/c.rs", "use crate::{Renamed, b as _};\n"),
        (
            "src/d.rs",
            "#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline { use crate::c::Y; }\n",
        ),
        ("src/d/tests.rs", "use crate::a::*;\n"),
    ];
    for (path, text) in files {
        let path = root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let graph = module_graph(root.path(), Path::new("src"));
    let targets =
        |module: &str| -> Vec<&str> { graph[module].keys().map(String::as_str).collect() };
    assert_eq!(targets("a"), ["b"]);
    assert_eq!(targets("b"), ["a"]);
    assert_eq!(targets("c"), ["b", "d"]);
    assert!(
        targets("d").is_empty(),
        "test code is no edge: {:?}",
        targets("d")
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, ["a", "b"]);
    assert!(found[0].1[0].contains("src/a.rs:1"), "{:?}", found[0].1);
}
