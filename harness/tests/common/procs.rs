//! Finding the processes of a test's own cells: by a folder only that test uses, which each
//! cell process has in its environment (`TMPDIR`, `HOME`) or on its command line. Nothing
//! outside the test can match, so a test may kill what it finds.

/// Live (non-zombie) processes, other than this one, whose environment or command line holds
/// `marker`; with their command names.
pub fn mentioning(marker: &str) -> Vec<(i32, String)> {
    let own = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != own)
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            if state == "Z" || state == "X" {
                return None;
            }
            let mut text = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            text.extend(std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default());
            let mentions = text
                .windows(marker.len())
                .any(|window| window == marker.as_bytes());
            mentions.then(|| {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                (pid, name)
            })
        })
        .collect()
}
