//! The parts of docs/environments.md that say what the catalogue says: the environments' table,
//! their causes and the container mechanisms, generated from [`crate::catalogue`] and
//! [`crate::spec::MECHANISMS`] so that each fact is written once, in the spec.
//!
//! Each part sits in the doc between `<!-- BEGIN GENERATED NAME -->` and
//! `<!-- END GENERATED NAME -->`. A test fails when the doc differs; run it with
//! `HARNESS_UPDATE_DOCS=1` to rewrite the parts (then review the diff).

use crate::catalogue;
use crate::spec::MECHANISMS;

/// The generated parts, by name: `(name, text)`.
pub fn parts() -> Vec<(&'static str, String)> {
    vec![
        ("environments", environments_table()),
        ("causes", causes()),
        ("mechanisms", mechanisms_table()),
    ]
}

/// A table cell: pipes escaped, so a message with `|` stays one cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn code(text: &str) -> String {
    format!("`{}`", cell(text))
}

/// One row per environment: what it stands for, the mechanism here, the exact message, its
/// signature row and when it fails Codex.
pub fn environments_table() -> String {
    let mut out = String::from(
        "| name | stands for | mechanism here | exact message | signature row | fails Codex |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for spec in catalogue::all() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            spec.name,
            cell(spec.stands_for),
            cell(spec.restricts),
            spec.message.map_or("—".to_string(), code),
            spec.signature_row.map_or("—".to_string(), code),
            cell(spec.fails_at.describe()),
        ));
    }
    out
}

/// Why each environment fails the way it does: its spec's cause.
pub fn causes() -> String {
    catalogue::all()
        .into_iter()
        .filter(|spec| !spec.cause.is_empty())
        .map(|spec| format!("- **{}.** {}\n", spec.name, spec.cause))
        .collect()
}

/// The container mechanisms and how each runtime renders them.
pub fn mechanisms_table() -> String {
    let mut out = String::from(
        "| `ContainerSpec` field | what it does | runc (`sandbox::oci`) | Docker (`sandbox::docker`) |\n\
         | --- | --- | --- | --- |\n",
    );
    for mechanism in MECHANISMS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            mechanism.field,
            cell(mechanism.what),
            cell(mechanism.runc),
            cell(mechanism.docker)
        ));
    }
    out
}

/// `doc` with each generated part replaced by `parts`; an error names a part whose markers are
/// missing.
pub fn rewrite(doc: &str, parts: &[(&str, String)]) -> Result<String, String> {
    let mut out = doc.to_string();
    for (name, text) in parts {
        let begin = format!("<!-- BEGIN GENERATED {name} -->\n");
        let end = format!("<!-- END GENERATED {name} -->");
        let start = out
            .find(&begin)
            .ok_or_else(|| format!("no `{}` marker", begin.trim()))?
            + begin.len();
        let stop = out[start..]
            .find(&end)
            .ok_or_else(|| format!("no `{end}` marker after its BEGIN"))?
            + start;
        out.replace_range(start..stop, text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environments_doc_shows_what_the_catalogue_says() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/environments.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let generated =
            rewrite(&doc, &parts()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if generated == doc {
            return;
        }
        if std::env::var("HARNESS_UPDATE_DOCS").as_deref() == Ok("1") {
            std::fs::write(&path, generated).unwrap();
            return;
        }
        panic!(
            "{} differs from the catalogue: rerun with HARNESS_UPDATE_DOCS=1 \
             (cargo test -p sandbox --lib catalogue_doc) and review the diff",
            path.display()
        );
    }

    #[test]
    fn a_message_with_a_pipe_stays_one_cell() {
        assert_eq!(cell("MS_REC|MS_SLAVE"), "MS_REC\\|MS_SLAVE");
        let rewritten = rewrite(
            "a\n<!-- BEGIN GENERATED x -->\nold\n<!-- END GENERATED x -->\nb",
            &[("x", "new\n".to_string())],
        )
        .unwrap();
        assert_eq!(
            rewritten,
            "a\n<!-- BEGIN GENERATED x -->\nnew\n<!-- END GENERATED x -->\nb"
        );
        assert!(rewrite("a", &[("x", String::new())]).is_err());
    }
}
