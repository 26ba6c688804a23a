//! Where evidence and reports go.

use std::path::{Path, PathBuf};

/// Overrides the folder that holds one sub-folder per cell (and the reports).
pub(crate) const OUT_DIR_VAR: &str = "HARNESS_OUT_DIR";

/// The conformance output folder: `$HARNESS_OUT_DIR`, else `<cargo target dir>/conformance`;
/// always absolute, since app-servers get paths in it while running in other folders.
pub fn conformance_root() -> PathBuf {
    let dir = match std::env::var_os(OUT_DIR_VAR).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => target_dir().join("conformance"),
    };
    std::path::absolute(&dir).unwrap_or(dir)
}

/// The workspace's cargo `target` folder: `$CARGO_TARGET_DIR` when set; else the nearest
/// ancestor of the running executable that cargo marked as a target folder (`CACHEDIR.TAG`, or
/// `.rustc_info.json` in a custom target folder; test binaries live in `target/debug/deps/`,
/// `harness` in `target/debug/`); else `./target`.
pub(crate) fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| find_marked_ancestor(&exe))
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn find_marked_ancestor(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .skip(1)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file() || dir.join(".rustc_info.json").is_file())
        .map(Path::to_path_buf)
}

/// The repository root (holds `suites/suites.toml`): searched upwards from the current folder,
/// then from the running executable.
pub fn repo_root() -> Option<PathBuf> {
    let is_root = |dir: &Path| dir.join("suites").join("suites.toml").is_file();
    let from_cwd = std::env::current_dir()
        .ok()
        .and_then(|cwd| cwd.ancestors().find(|d| is_root(d)).map(Path::to_path_buf));
    from_cwd.or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.ancestors().find(|d| is_root(d)).map(Path::to_path_buf))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marked_ancestor_is_found_above_deps() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        let deps = target.join("debug").join("deps");
        std::fs::create_dir_all(&deps).unwrap();
        std::fs::write(
            target.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55",
        )
        .unwrap();
        assert_eq!(
            find_marked_ancestor(&deps.join("cells-0123")),
            Some(target.clone())
        );
        assert_eq!(find_marked_ancestor(&dir.path().join("x")), None);
    }
}
