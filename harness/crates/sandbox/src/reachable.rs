//! Whether a container's non-root uid can start a process's program at all, asked before the
//! container is made: a program (or a script's interpreter) that resolves to a file below a
//! folder that uid cannot enter, and that no bind brings into the container, would end as exit
//! 126/127 and an `incomplete` verdict that names nothing. The usual case is a virtualenv whose
//! `bin/python` links into a 0700 home (pyenv, uv): the venv is bound, its link's target is not.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The topmost ancestor of `path` that `uid` cannot search (no `x` for others and not its
/// owner), if any.
pub fn blocking_ancestor(path: &Path, uid: u32) -> Option<PathBuf> {
    blocking_ancestor_from(path, Path::new(""), uid).map(Path::to_path_buf)
}

/// [`blocking_ancestor`], looking only at `top` and the folders below it (every folder: `""`).
fn blocking_ancestor_from<'a>(path: &'a Path, top: &Path, uid: u32) -> Option<&'a Path> {
    path.ancestors()
        .skip(1)
        .take_while(|ancestor| ancestor.starts_with(top))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find(|ancestor| blocks(ancestor, uid))
}

/// Whether `uid` cannot search `folder` (not its owner, no `x` for others).
fn blocks(folder: &Path, uid: u32) -> bool {
    std::fs::metadata(folder).is_ok_and(|meta| meta.uid() != uid && meta.mode() & 0o001 == 0)
}

/// Why `uid` cannot start `program` in a container whose binds are `bound` (each visible at its
/// own path, whatever hides its ancestors, with the permissions it has), or `None` when it can
/// as far as the files tell. A program given by name or relative path (looked up in the container) or not there at all is
/// left to the launch, whose own error names it.
pub fn unreachable_program(program: &Path, uid: u32, bound: &[PathBuf]) -> Option<String> {
    if !program.is_absolute() || std::fs::symlink_metadata(program).is_err() {
        return None;
    }
    let mut chain = vec![program.to_path_buf()];
    if let Some(interpreter) = interpreter_of(program) {
        chain.push(interpreter);
    }
    for (index, path) in chain.iter().enumerate() {
        let what = if index == 0 {
            format!("its program {}", path.display())
        } else {
            format!("the interpreter {} its program names", path.display())
        };
        let Ok(target) = std::fs::canonicalize(path) else {
            return Some(format!("{what} resolves to no file (a dangling link?)"));
        };
        // A bind shows a folder whatever hides its ancestors, but not what is private below it.
        let top = bound
            .iter()
            .filter(|folder| target.starts_with(folder))
            .max_by_key(|folder| folder.components().count())
            .map_or(Path::new("/"), PathBuf::as_path);
        if let Some(ancestor) = blocking_ancestor_from(&target, top, uid) {
            let resolved = if &target == path {
                String::new()
            } else {
                format!(" (it resolves to {})", target.display())
            };
            return Some(format!(
                "uid {uid} cannot start {what}{resolved}: it lies below {} ({}), a folder uid {uid} cannot enter, in the container as on the host (a virtualenv whose interpreter links into a private home is the usual cause). To fix it, name the install in the drivers file through `{{cache}}` (`harness provision` installs published drivers there, and the harness binds what a command names below it, with the interpreter a virtualenv links to, readable at its own path), or install it below a folder uid {uid} can enter",
                ancestor.display(),
                describe(ancestor),
            ));
        }
    }
    None
}

/// Why environment `environment`, whose container processes run as `uid` with the binds
/// `bound`, cannot start `program` (the cell's error before it runs), or `None`. Root reaches
/// everything the binds bring in. Shared by every container runtime: runc and Docker bind the
/// same folders at the same paths.
pub fn container_cannot_start(
    environment: &str,
    uid: u32,
    bound: &[PathBuf],
    program: &Path,
) -> Option<String> {
    if uid == 0 {
        return None;
    }
    unreachable_program(program, uid, bound)
        .map(|why| format!("environment `{environment}` runs its processes as uid {uid}: {why}"))
}

/// A script's interpreter, when it names one by absolute path (`#!/usr/bin/env NAME` is
/// resolved in the container by `env` itself, on the container's `PATH`).
fn interpreter_of(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let interpreter = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    let interpreter = Path::new(interpreter);
    (interpreter.is_absolute() && !interpreter.ends_with("env")).then(|| interpreter.to_path_buf())
}

fn describe(folder: &Path) -> String {
    match std::fs::metadata(folder) {
        Ok(meta) => format!("mode {:o}, owner uid {}", meta.mode() & 0o7777, meta.uid()),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A private home holding an interpreter, a virtualenv outside it linking to it, and a
    /// script naming the interpreter directly.
    fn layout() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let python = home.join("bin/python3");
        std::fs::write(&python, "").unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let venv = root.path().join("venv/bin");
        std::fs::create_dir_all(&venv).unwrap();
        std::os::unix::fs::symlink(&python, venv.join("python")).unwrap();
        let script = root.path().join("driver");
        std::fs::write(&script, format!("#!{} -u\nprint()\n", python.display())).unwrap();
        (root, home, venv.join("python"), script)
    }

    #[test]
    fn a_venv_link_into_a_private_home_is_named_with_the_uid_and_the_folder() {
        let (root, home, venv_python, script) = layout();
        let bound = vec![root.path().join("venv")];
        let why = unreachable_program(&venv_python, 1000, &bound).expect("unreachable");
        assert!(why.contains("uid 1000"), "{why}");
        assert!(why.contains(&home.display().to_string()), "{why}");
        assert!(why.contains("it resolves to"), "{why}");
        assert!(
            why.contains("To fix it, name the install in the drivers file through `{cache}`")
                && why.contains("harness provision")
                && why.contains("a folder uid 1000 can enter"),
            "the error names the fix: {why}"
        );
        let why = unreachable_program(&venv_python, 1000, &[root.path().into()])
            .expect("a private folder below a bound one stays private");
        assert!(why.contains(&home.display().to_string()), "{why}");
        let why = unreachable_program(&script, 1000, &[]).expect("unreachable interpreter");
        assert!(why.contains("the interpreter"), "{why}");
    }

    #[test]
    fn a_bound_target_its_owner_and_a_public_path_are_reachable() {
        let (root, home, venv_python, _) = layout();
        assert_eq!(
            unreachable_program(&venv_python, 1000, &[home.join("bin")]),
            None,
            "a bind below the private folder shows the interpreter"
        );
        let owner = std::fs::metadata(&home).unwrap().uid();
        assert_eq!(unreachable_program(&venv_python, owner, &[]), None);
        assert_eq!(
            unreachable_program(Path::new("/bin/sh"), 1000, &[root.path().into()]),
            None
        );
    }

    #[test]
    fn a_dangling_link_is_named() {
        let root = tempfile::tempdir().unwrap();
        let link = root.path().join("python");
        std::os::unix::fs::symlink(root.path().join("gone"), &link).unwrap();
        let why = unreachable_program(&link, 1000, &[]).unwrap();
        assert!(why.contains("resolves to no file"), "{why}");
    }
}
