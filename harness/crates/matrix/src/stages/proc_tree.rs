//! A driver's process tree as `/proc` shows it: who is whose parent, and the CPU time the tree
//! has used. Read by hand, as in `control`: four numeric fields of `stat` do not justify a procfs
//! dependency tree.

/// Every pid `/proc` lists, in order.
pub(crate) fn all_pids() -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// The fields of `/proc/PID/stat` after the command name: `comm` may hold spaces and
/// parentheses, so they are counted after its last `)` (index 0 is field 3, `state`).
fn stat_fields(pid: i32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // `state` is a letter; every later field read here is a number.
    Some(
        rest.split_whitespace()
            .skip(1)
            .map(|field| field.parse().unwrap_or(0))
            .collect(),
    )
}

pub(crate) fn parent(pid: i32) -> Option<i32> {
    let fields = stat_fields(pid)?;
    i32::try_from(*fields.first()?).ok()
}

/// Clock ticks of CPU the process and its reaped children have used (`utime`, `stime`,
/// `cutime`, `cstime`: fields 14–17).
fn cpu_ticks(pid: i32) -> u64 {
    stat_fields(pid)
        .map(|fields| fields.iter().skip(10).take(4).sum())
        .unwrap_or(0)
}

/// The CPU the tree under `root` (itself included) has used, in clock ticks: everything a
/// driver's interpreter, a container runtime's init and what they started have run so far.
/// Processes that ended and were reaped count through their parent's `cutime`/`cstime`.
pub(crate) fn tree_cpu_ticks(root: i32) -> u64 {
    let pids = all_pids();
    let parents: Vec<(i32, Option<i32>)> = pids.iter().map(|&pid| (pid, parent(pid))).collect();
    let mut tree = vec![root];
    // Breadth-first over the parent links; each pid joins once, so the walk ends.
    let mut at = 0;
    while let Some(&pid) = tree.get(at) {
        tree.extend(
            parents
                .iter()
                .filter(|(child, up)| *up == Some(pid) && !tree.contains(child))
                .map(|(child, _)| *child)
                .collect::<Vec<_>>(),
        );
        at += 1;
    }
    tree.into_iter().map(cpu_ticks).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_working_tree_uses_cpu_and_a_sleeping_one_does_not() {
        use std::os::unix::process::CommandExt;
        let mut sleeping = std::process::Command::new("sh")
            .args(["-c", "sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap();
        // A child of the shell does the work: the tree, not the root alone, is counted.
        let mut working = std::process::Command::new("sh")
            .args(["-c", "sh -c 'while :; do :; done'; :"])
            .process_group(0)
            .spawn()
            .unwrap();
        let sleeping_pid = i32::try_from(sleeping.id()).unwrap();
        let working_pid = i32::try_from(working.id()).unwrap();
        let (sleeping_before, working_before) =
            (tree_cpu_ticks(sleeping_pid), tree_cpu_ticks(working_pid));
        let deadline = Instant::now() + Duration::from_secs(20);
        while tree_cpu_ticks(working_pid) < working_before + 20 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let working_after = tree_cpu_ticks(working_pid);
        let sleeping_after = tree_cpu_ticks(sleeping_pid);
        for child in [&mut sleeping, &mut working] {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(
            working_after >= working_before + 20,
            "{working_before} → {working_after}"
        );
        assert!(
            sleeping_after <= sleeping_before + 1,
            "{sleeping_before} → {sleeping_after}"
        );
    }
}
