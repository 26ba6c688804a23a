//! `app-server generate-json-schema --out DIR`: the fake serves the protocol of the pinned Codex,
//! so it hands out that Codex's own generated schema rather than a schema of its own making. The
//! harness points `FAKE_APP_SERVER_SCHEMA_DIR` at a folder the pinned Codex generated.

use std::path::Path;

pub(crate) const SCHEMA_DIR_ENV: &str = "FAKE_APP_SERVER_SCHEMA_DIR";

pub(crate) fn generate(out: &Path) -> Result<(), String> {
    let source = std::env::var_os(SCHEMA_DIR_ENV)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            format!(
                "fake-app-server cannot generate the protocol schema itself: set {SCHEMA_DIR_ENV} to a folder written by the pinned Codex's `app-server generate-json-schema --experimental`"
            )
        })?;
    let source = Path::new(&source);
    if !source.join("ClientRequest.json").is_file() {
        return Err(format!(
            "{SCHEMA_DIR_ENV}={} holds no ClientRequest.json: not a generated app-server schema",
            source.display()
        ));
    }
    copy_tree(source, out).map_err(|e| {
        format!(
            "cannot copy the schema from {} to {}: {e}",
            source.display(),
            out.display()
        )
    })
}

// Two levels of plain files (`*.json`, `v1/`, `v2/`): a recursive copy is a few lines, no crate.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}
