//! The cell pipeline passes ownership (issue 40, `matrix::stages`): a stage takes what earlier
//! stages handed on and returns its own output; what it starts that must end with the cell goes
//! to the cell's guard in `matrix::cell`, never through the stage. Read from the stages' source
//! as tokens (proc-macro2), so comments and strings name nothing:
//!
//! - no stage names the `CellGuard`;
//! - no function of a stage borrows mutably another stage's output (a stage that takes
//!   `&mut Sandbox` to move a part out of it owns that part, and should be handed it);
//! - no function of a stage takes more than [`MAX_PARAMETERS`] parameters (the driver stage
//!   took seven, every earlier output).

use crate::layers::workspace_root;
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The most parameters a stage's function takes.
const MAX_PARAMETERS: usize = 6;

/// What a stage returns (and the guard): handed on by value or shared, never lent mutably.
const STAGE_OUTPUTS: &[&str] = &[
    "CellGuard",
    "Folders",
    "AppServer",
    "Declaration",
    "Driver",
    "Sandbox",
    "SandboxEvidence",
    "DriverRun",
    "WireEvents",
];

fn stage_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &workspace_root().join("harness/crates/matrix/src/stages"),
        &mut found,
    );
    found.sort();
    assert!(found.len() > 5, "the stages' sources: {found:?}");
    found
}

/// A function's parameters, each as its tokens: split at the commas outside `<…>`.
fn parameters(list: &TokenStream) -> Vec<Vec<TokenTree>> {
    let mut params = vec![Vec::new()];
    let mut angle = 0usize;
    let mut after_dash = false;
    for token in list.clone() {
        if let TokenTree::Punct(punct) = &token {
            match punct.as_char() {
                '<' => angle += 1,
                // `->` of a closure's type is no closing bracket.
                '>' if !after_dash => angle = angle.saturating_sub(1),
                ',' if angle == 0 => {
                    params.push(Vec::new());
                    after_dash = false;
                    continue;
                }
                _ => {}
            }
            after_dash = punct.as_char() == '-';
        } else {
            after_dash = false;
        }
        params.last_mut().unwrap().push(token);
    }
    params.retain(|p| !p.is_empty());
    params
}

fn ident_is(token: Option<&TokenTree>, name: &str) -> bool {
    matches!(token, Some(TokenTree::Ident(ident)) if ident == name)
}

/// `&mut T` (or `&'a mut T`) where `T` is a stage's output, by its last path segment.
fn borrows_a_stage_output_mutably(param: &[TokenTree]) -> Option<String> {
    let is_punct =
        |t: Option<&TokenTree>, c: char| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c);
    let amp = param.iter().position(|t| is_punct(Some(t), '&'))?;
    let mut at = amp + 1;
    // A lifetime: `'` and its name.
    if is_punct(param.get(at), '\'') {
        at += 2;
    }
    if !ident_is(param.get(at), "mut") {
        return None;
    }
    param[at + 1..]
        .iter()
        .filter_map(|t| match t {
            TokenTree::Ident(i) => Some(i.to_string()),
            _ => None,
        })
        .next_back()
        .filter(|name| STAGE_OUTPUTS.contains(&name.as_str()))
}

/// Every finding in `tokens` (nested groups too), as `file:line: what`.
fn check(tokens: TokenStream, file: &str, findings: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (at, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(ident) if ident == "CellGuard" => findings.push(format!(
                "{file}:{}: a stage names the CellGuard: return what it starts, and let \
                 matrix::cell hand it to the guard",
                ident.span().start().line
            )),
            TokenTree::Ident(ident) if ident == "fn" => {
                let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(list))) =
                    (tokens.get(at + 1), tokens.get(at + 2))
                else {
                    continue;
                };
                if list.delimiter() != Delimiter::Parenthesis {
                    continue;
                }
                let line = name.span().start().line;
                let params = parameters(&list.stream());
                if params.len() > MAX_PARAMETERS {
                    findings.push(format!(
                        "{file}:{line}: `{name}` takes {} parameters (at most {MAX_PARAMETERS}): \
                         take what the stage needs, as one value an earlier stage returned",
                        params.len()
                    ));
                }
                for param in &params {
                    if let Some(output) = borrows_a_stage_output_mutably(param) {
                        findings.push(format!(
                            "{file}:{line}: `{name}` borrows `&mut {output}`: take the part it \
                             uses by value"
                        ));
                    }
                }
            }
            TokenTree::Group(group) => check(group.stream(), file, findings),
            _ => {}
        }
    }
}

#[test]
fn stages_take_what_they_need_and_never_the_guard() {
    let root = workspace_root();
    let mut findings = Vec::new();
    for path in stage_sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let tokens = TokenStream::from_str(&text)
            .unwrap_or_else(|e| panic!("{} does not tokenize: {e}", path.display()));
        let file = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        check(tokens, &file, &mut findings);
    }
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}

#[test]
fn the_rules_see_what_the_pipeline_once_did() {
    let old = r#"
        pub(crate) async fn run(ctx: &CellContext, cell: &Cell, folders: &Folders,
            app_server: &AppServer, sandbox: &Sandbox, driver: &Driver,
            launcher: &dyn Launcher) -> Result<DriverRun> { todo!() }
        pub async fn prepare(ctx: &CellContext, guard: &mut CellGuard) {}
        fn with_the_harness_evidence(wire: WireEvents, sandbox: &mut Sandbox,
            home: Option<&'a mut crate::stages::sandbox::Sandbox>) {}
        fn fine(&mut self, map: HashMap<String, Vec<u8>>, f: impl Fn(u8) -> u8, e: &mut Vec<u8>) {}
    "#;
    let mut findings = Vec::new();
    check(TokenStream::from_str(old).unwrap(), "old.rs", &mut findings);
    let said = findings.join("\n");
    assert_eq!(findings.len(), 5, "{said}");
    assert!(said.contains("`run` takes 7 parameters"), "{said}");
    assert!(said.contains("names the CellGuard"), "{said}");
    assert!(
        said.contains("`prepare` borrows `&mut CellGuard`"),
        "{said}"
    );
    assert_eq!(said.matches("borrows `&mut Sandbox`").count(), 2, "{said}");
    assert!(!said.contains("`fine`"), "{said}");
}
