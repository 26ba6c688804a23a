//! Reading a cell's evidence file as the harness does: through its name, decompressed when the
//! cell compressed it once graded (`NAME.gz`, docs/events.md "What a cell's folder keeps").

use std::path::Path;

/// The text of the evidence file `path` (or of `path.gz`), an error naming it.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    let bytes = graders::evidence_file::read(path, graders::evidence_file::MAX_STREAMED_BYTES)
        .map_err(std::io::Error::other)?
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not there (nor compressed)", path.display()),
            )
        })?;
    String::from_utf8(bytes).map_err(std::io::Error::other)
}

/// The JSON records of the evidence file `path` (JSON Lines; a line that is not JSON is
/// skipped); panics naming the file when it cannot be read.
pub fn json_records(path: &Path) -> Vec<serde_json::Value> {
    let text = read_text(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
