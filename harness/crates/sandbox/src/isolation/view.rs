//! The view's mounts, planned before the fork: which folders are covered (hidden, private)
//! and which trees are placed in it, in the order they are applied.

use super::{c_path, DriverIds, Isolation, PRIVATE_SIZE};
use anyhow::{Context, Result};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// A tree cloned before anything is hidden: its path, and whether the clone is made read-only.
pub(super) type Tree = (CString, bool);

/// One step of the view, applied in order of depth (a folder before what lies below it).
pub(super) enum Step {
    /// Mount a fresh tmpfs with these options on the folder (made first where a cover above
    /// it left nothing: the folder is there on the host); a hiding one (`seal`) is made
    /// read-only once what appears below it is in place, so nothing can be added beside what
    /// it shows.
    Cover {
        path: CString,
        ancestors: Vec<CString>,
        options: CString,
        seal: bool,
    },
    /// Put the cloned tree `tree` at `path`, making `path` (and its missing ancestors, inside a
    /// tmpfs) first.
    Place {
        tree: usize,
        path: CString,
        ancestors: Vec<CString>,
        file: bool,
    },
}

/// The folders above `path`, the topmost first, `/` left out.
fn ancestors_of(path: &Path) -> Result<Vec<CString>> {
    let mut ancestors: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .filter(|a| a.components().count() > 1)
        .collect();
    ancestors.reverse();
    ancestors.into_iter().map(c_path).collect()
}

/// The isolation's folders as the kernel resolves them (a link is placed where it leads);
/// what is not there is not shown.
pub(super) struct Folders {
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    private: Vec<PathBuf>,
}

impl Folders {
    pub(super) fn of(isolation: &Isolation, run_as: Option<DriverIds>) -> Folders {
        let canonical = |paths: &[PathBuf]| -> Vec<PathBuf> {
            let mut found: Vec<PathBuf> = paths
                .iter()
                .filter_map(|path| std::fs::canonicalize(path).ok())
                .collect();
            found.dedup();
            found
        };
        let writable = canonical(&isolation.writable);
        let read_only = canonical(&isolation.read_only);
        let mut hidden = canonical(&isolation.hidden);
        if let Some(ids) = run_as {
            // A folder the driver's uid cannot enter (a 0700 home holding the harness cache)
            // is hidden; what it must reach below it appears again.
            for path in writable.iter().chain(read_only.iter()) {
                if let Some(ancestor) = crate::reachable::blocking_ancestor(path, ids.uid) {
                    if !hidden.contains(&ancestor) {
                        hidden.push(ancestor);
                    }
                }
            }
        }
        let private = canonical(&isolation.private);
        Folders {
            writable,
            read_only,
            hidden,
            private,
        }
    }
}

/// The view's mounts, outermost first (a folder before what it holds; at one depth the covers
/// before the trees placed on them): the trees to open before the fork (path, read-only) and
/// the steps that cover folders and place the trees (and the `replaced` files, shown at their
/// places) in the view.
pub(super) fn mount_steps(
    folders: &Folders,
    replaced: &[(PathBuf, PathBuf)],
) -> Result<(Vec<Tree>, Vec<Step>)> {
    let Folders {
        writable,
        read_only,
        hidden,
        private,
    } = folders;
    let mut trees = Vec::new();
    // (depth, order at one depth, step)
    let mut steps: Vec<(usize, u8, Step)> = Vec::new();
    let depth = |path: &Path| path.components().count();
    let visible: Vec<&PathBuf> = writable.iter().chain(read_only.iter()).collect();
    for (path, options, hiding) in hidden
        .iter()
        .map(|p| (p, "mode=0755".to_string(), true))
        .chain(
            private
                .iter()
                .map(|p| (p, format!("mode=1777,size={PRIVATE_SIZE}"), false)),
        )
    {
        steps.push((
            depth(path),
            0,
            Step::Cover {
                path: c_path(path)?,
                ancestors: ancestors_of(path)?,
                options: CString::new(options)?,
                // A folder that appears again at the same path needs no seal of its own.
                seal: hiding && !visible.contains(&path),
            },
        ));
    }
    for (path, read_only) in writable
        .iter()
        .map(|p| (p, false))
        .chain(read_only.iter().map(|p| (p, true)))
    {
        let ancestors = ancestors_of(path)?;
        steps.push((
            depth(path),
            1,
            Step::Place {
                tree: trees.len(),
                path: c_path(path)?,
                ancestors,
                file: !path.is_dir(),
            },
        ));
        trees.push((c_path(path)?, read_only));
    }
    for (what, place) in replaced {
        let what = std::fs::canonicalize(what)
            .with_context(|| format!("{} (to show at {})", what.display(), place.display()))?;
        steps.push((
            depth(place),
            1,
            Step::Place {
                tree: trees.len(),
                path: c_path(place)?,
                ancestors: ancestors_of(place)?,
                file: true,
            },
        ));
        trees.push((c_path(&what)?, true));
    }
    steps.sort_by_key(|(depth, order, _)| (*depth, *order));
    Ok((trees, steps.into_iter().map(|(_, _, step)| step).collect()))
}
