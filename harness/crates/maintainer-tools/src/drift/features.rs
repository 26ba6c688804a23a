//! The feature names `codex --enable/--disable NAME` accepts besides the ones `codex features
//! list` lists: legacy aliases (Codex 0.169 accepts `web_search`, the old name of
//! `web_search_request`), recorded per persona as `feature_aliases.txt`. Derived from the binary
//! itself: the candidates are the feature keys its own messages name (`[features].NAME`,
//! `features.NAME`, as in its deprecation notices) and the names in the static tables those
//! keys sit in ([`table_neighbours`]: the legacy alias table), each kept only when the binary accepts it
//! (`app-server --disable NAME --print-startup-config` exits 0; an unknown name exits 1 with
//! "Unknown feature flag").

use anyhow::{Context, Result};
use regex::bytes::Regex;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The longest feature name taken for a candidate.
const MAX_NAME: usize = 64;

/// The longest a probe may take (an accepted name prints the start-up config and exits).
const PROBE_BOUND: Duration = Duration::from_secs(10);

/// The names `codex features list` prints (its first column).
pub(crate) fn listed_features(program: &Path, home: &Path) -> Result<BTreeSet<String>> {
    let output = scratch_command(program, home)
        .args(["features", "list"])
        .output()
        .with_context(|| format!("running {} features list", program.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} features list failed: {}",
        program.display(),
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// The feature keys the binary's own text names (`[features].NAME`, `features.NAME`, as long
/// as the lowercase run goes), but those `listed`.
pub(crate) fn candidates(binary: &[u8], listed: &BTreeSet<String>) -> BTreeSet<String> {
    let pattern = Regex::new(r"(?:\[features\]\.|features\.)([a-z][a-z0-9_]*)")
        .expect("the feature-key pattern compiles");
    pattern
        .captures_iter(binary)
        .filter_map(|found| std::str::from_utf8(&found[1]).ok().map(str::to_string))
        // Where the text runs on into a neighbour (`…_requestfeatures`), the match is no
        // name: the binary refuses it when probed.
        .filter(|name| name.len() <= MAX_NAME && !listed.contains(name))
        .collect()
}

/// The strides a static table of names may have: a `&str` (16 bytes) alone or with up to
/// four more words beside it (an alias table's `(legacy_key, Feature)` is 24).
const TABLE_STRIDES: &[usize] = &[16, 24, 32, 40, 48];

/// The names in the static tables `seeds` sit in. A `&'static str` in a table of a Rust
/// binary is its pointer and its length side by side; a non-PIE (static musl) binary holds the
/// pointer itself in its file. Every table entry that is `(address of a seed's text, its
/// length)` is found in the loaded segments; from there, entry by entry in both directions at
/// each of [`TABLE_STRIDES`], the names as long as each entry is a `(pointer, length)` of a
/// lowercase feature-like name. How Codex's legacy alias table (`connectors`, `collab`,
/// `memory_tool`, … beside `web_search`) is found: its texts are concatenated in the binary
/// with no separator, so no text pattern finds them.
pub(crate) fn table_neighbours(binary: &[u8], seeds: &BTreeSet<String>) -> BTreeSet<String> {
    let segments = loaded_segments(binary);
    let at = |vaddr: u64| -> Option<usize> {
        segments.iter().find_map(|&(start, offset, size)| {
            (start..start + size)
                .contains(&vaddr)
                .then(|| usize::try_from(offset + (vaddr - start)).ok())
                .flatten()
        })
    };
    let word = |offset: usize| -> Option<u64> {
        let bytes = binary.get(offset..offset + 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    };
    let name_at = |offset: usize| -> Option<String> {
        let (pointer, length) = (word(offset)?, usize::try_from(word(offset + 8)?).ok()?);
        if !(1..=MAX_NAME).contains(&length) {
            return None;
        }
        let text = binary.get(at(pointer)?..at(pointer)? + length)?;
        let name = std::str::from_utf8(text).ok()?;
        let feature_like = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        feature_like.then(|| name.to_string())
    };
    let mut found = BTreeSet::new();
    for &(_, offset, size) in &segments {
        let (Ok(start), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
            continue;
        };
        let end = (start + size).min(binary.len()).saturating_sub(16);
        for entry in (start..end).step_by(8) {
            let is_seed = word(entry + 8)
                .and_then(|length| usize::try_from(length).ok())
                .is_some_and(|length| (1..=MAX_NAME).contains(&length))
                && name_at(entry).is_some_and(|name| seeds.contains(&name));
            if !is_seed {
                continue;
            }
            for &stride in TABLE_STRIDES {
                for forward in [true, false] {
                    let mut next = entry;
                    loop {
                        next = match forward {
                            true => next + stride,
                            false => match next.checked_sub(stride) {
                                Some(n) => n,
                                None => break,
                            },
                        };
                        match name_at(next) {
                            Some(name) => found.insert(name),
                            None => break,
                        };
                    }
                }
            }
        }
    }
    found
}

/// The loaded segments of an ELF64 little-endian file: `(virtual address, file offset, file
/// size)`; none for another format.
fn loaded_segments(binary: &[u8]) -> Vec<(u64, u64, u64)> {
    let read = |offset: usize, width: usize| -> Option<u64> {
        let bytes = binary.get(offset..offset + width)?;
        let mut buffer = [0u8; 8];
        buffer[..width].copy_from_slice(bytes);
        Some(u64::from_le_bytes(buffer))
    };
    if binary.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Vec::new();
    }
    let (Some(table), Some(entry_size), Some(count)) =
        (read(0x20, 8), read(0x36, 2), read(0x38, 2))
    else {
        return Vec::new();
    };
    (0..count)
        .filter_map(|index| {
            let header = usize::try_from(table + index * entry_size).ok()?;
            let loadable = read(header, 4)? == 1;
            loadable.then_some((
                read(header + 16, 8)?,
                read(header + 8, 8)?,
                read(header + 32, 8)?,
            ))
        })
        .collect()
}

/// Whether the binary accepts `--disable NAME`.
fn accepted(program: &Path, home: &Path, name: &str) -> Result<bool> {
    let mut child = scratch_command(program, home)
        .args(["app-server", "--disable", name, "--print-startup-config"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    let status = sandbox::system::wait_bounded(&mut child, PROBE_BOUND)?
        .with_context(|| format!("--disable {name}: no exit within {PROBE_BOUND:?}"))?;
    Ok(status.success())
}

fn scratch_command(program: &Path, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("CODEX_HOME", home)
        .current_dir(home);
    command
}

/// The legacy feature names `program` accepts, found as the module says.
pub(crate) fn feature_aliases(program: &Path, scratch: &Path) -> Result<BTreeSet<String>> {
    let home = scratch.join("home");
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let listed = listed_features(program, &home)?;
    let binary =
        std::fs::read(program).with_context(|| format!("reading {}", program.display()))?;
    let mut named = candidates(&binary, &listed);
    let neighbours = table_neighbours(&binary, &named);
    named.extend(neighbours.into_iter().filter(|n| !listed.contains(n)));
    let mut aliases = BTreeSet::new();
    for name in named {
        if accepted(program, &home, &name)? {
            aliases.insert(name);
        }
    }
    Ok(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 file: one loaded segment mapping the whole file at `BASE`.
    fn elf_with(body: &[u8]) -> Vec<u8> {
        const BASE: u64 = 0x40_0000;
        let mut file = vec![0u8; 0x78];
        file[..6].copy_from_slice(b"\x7fELF\x02\x01");
        file[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        file[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
        file[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        file[0x40..0x44].copy_from_slice(&1u32.to_le_bytes());
        file[0x48..0x50].copy_from_slice(&0u64.to_le_bytes());
        file[0x50..0x58].copy_from_slice(&BASE.to_le_bytes());
        file.extend_from_slice(body);
        let size = file.len() as u64 + 4096;
        file[0x60..0x68].copy_from_slice(&size.to_le_bytes());
        file.resize(size as usize, 0);
        file
    }

    #[test]
    fn the_table_a_known_alias_sits_in_gives_its_neighbours() {
        const BASE: u64 = 0x40_0000;
        // The texts run together, as in Codex's binary: no pattern can split them.
        let texts = b"connectorsweb_searchcollabmemory_toolHello";
        let mut body = texts.to_vec();
        while !body.len().is_multiple_of(8) {
            body.push(0);
        }
        let text_at = |start: usize| BASE + 0x78 + start as u64;
        // `(legacy_key, feature)` entries of 24 bytes.
        for (start, length) in [(0, 10), (10, 10), (20, 6), (26, 11)] {
            body.extend_from_slice(&text_at(start).to_le_bytes());
            body.extend_from_slice(&(length as u64).to_le_bytes());
            body.extend_from_slice(&7u64.to_le_bytes());
        }
        // Not a name: the table ends here.
        body.extend_from_slice(&text_at(37).to_le_bytes());
        body.extend_from_slice(&5u64.to_le_bytes());
        let file = elf_with(&body);
        let seeds: BTreeSet<String> = ["web_search".to_string()].into();
        let found: Vec<String> = table_neighbours(&file, &seeds).into_iter().collect();
        assert_eq!(found, ["collab", "connectors", "memory_tool"]);
        assert!(table_neighbours(b"not an ELF file", &seeds).is_empty());
    }

    #[test]
    fn candidates_are_the_feature_keys_the_text_names_but_the_listed_ones() {
        let text = b"xx[features].web_search_cached[features].web_searchSet `web_search` to ... features.use_legacy_landlock[features].web_search_request.";
        let listed: BTreeSet<String> = ["web_search_request", "use_legacy_landlock"]
            .into_iter()
            .map(String::from)
            .collect();
        let found: Vec<String> = candidates(text, &listed).into_iter().collect();
        assert_eq!(found, ["web_search", "web_search_cached"]);
    }
}
