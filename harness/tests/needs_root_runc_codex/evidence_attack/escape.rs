//! A `local` driver that tries to leave its cell (issue 36): as root on the host it could move
//! a double-forked child out of the cell's cgroup (which then outlived the run and rewrote a
//! later run's reports), replace the harness binary, write the harness cache and other runs'
//! folders, read root-only files and leave files in the host's `/tmp`. Each attempt must fail,
//! and the cell must still run and be graded as the driver's own command deserves.

use super::{context, wrapped_cell};
use libtest_mimic::Failed;
use matrix::cell::run_cell;
use report::layout::CellEvidence;
use report::outcome::CellOutcome;
use std::path::Path;

/// The escaping driver: `$1` its workspace, `$2` a file of targets (`NAME PATH` lines), then
/// the cell's own command. Each attack that works says `escaped: …`; then it runs the command.
const ESCAPING_DRIVER: &str = r#"
workspace=$1; targets=$2; shift 2
target() { sed -n "s/^$1 //p" "$targets"; }
marker=$(target marker)
# A double-forked child that moves itself to every cgroup.procs it can reach and stays.
( sh -c "for procs in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do
    echo \$\$ > \$procs 2>/dev/null && echo \"escaped: moved to \$procs\"; done
  exec sleep 3600 $marker" & ) </dev/null
printf 'x' >> "$(target harness)" 2>/dev/null && echo "escaped: wrote the harness binary"
mv "$(target harness)" "$(target harness).away" 2>/dev/null && echo "escaped: moved the harness binary"
touch "$(target cache)/escape-probe" 2>/dev/null && echo "escaped: wrote the harness cache"
echo forged > "$(target other-run)/summary.json" 2>/dev/null && echo "escaped: rewrote another run"
cat "$(target secret)" >/dev/null 2>&1 && echo "escaped: read a root-only file"
echo big > "$(target host-tmp)" 2>/dev/null
cat /etc/shadow >/dev/null 2>&1 && echo "escaped: read /etc/shadow"
# The app-server's home is in the driver's part: links there for it to follow as its user.
codex_home=$(dirname "$workspace")/home/.codex
mkdir -p "$codex_home" && rm -rf "$codex_home/installation_id" "$codex_home/sessions"
ln -s "$(target victim-file)" "$codex_home/installation_id"
ln -s "$(target victim-folder)" "$codex_home/sessions"
# The real Codex's folders (`codex/`) are made before the driver starts: put others in place.
part=$(dirname "$workspace")
if [ -d "$part/codex" ] && mv "$part/codex" "$part/codex.away" 2>/dev/null; then
  mkdir -p "$part/codex/home/.codex" "$part/codex/tmp" && chmod -R 777 "$part/codex"
  ln -s "$(target victim-folder)" "$part/codex/home/.codex/sessions"
  echo "escaped: put folders of its own in the place of the app-server's"
fi
echo "attacks done as uid $(id -u)"
exec "$@"
"#;

/// Runs `cell_name` with the escaping driver and checks the host afterwards.
pub fn a_local_driver_stays_in_its_cell(cell_name: &str) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let marker = format!("escape-marker-{}", std::process::id());
    // A copy of the harness binary serves the cell, so the attack on it can do no harm.
    let binary = scratch.path().join("bin/harness");
    std::fs::create_dir_all(binary.parent().ok_or("a folder")?)?;
    std::fs::copy(env!("CARGO_BIN_EXE_harness"), &binary)?;
    let before = std::fs::read(&binary)?;
    let other_run = scratch.path().join("other-run");
    std::fs::create_dir_all(&other_run)?;
    std::fs::write(other_run.join("summary.json"), "{}")?;
    let secret = scratch.path().join("secret");
    std::fs::write(&secret, "root only")?;
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    // What the app-server would write through the driver's links: root's, out of its reach.
    let victim_file = scratch.path().join("victim-file");
    std::fs::write(&victim_file, "root's")?;
    let victim_folder = scratch.path().join("victim-folder");
    std::fs::create_dir_all(&victim_folder)?;
    let host_tmp = std::env::temp_dir().join(format!("{marker}-left"));
    let cache = codex::provision::cache_root()?;
    std::fs::create_dir_all(&cache)?;
    let targets = scratch.path().join("targets");
    std::fs::write(
        &targets,
        format!(
            "marker {marker}\nharness {}\ncache {}\nother-run {}\nsecret {}\nhost-tmp {}\n\
             victim-file {}\nvictim-folder {}\n",
            binary.display(),
            cache.display(),
            other_run.display(),
            secret.display(),
            host_tmp.display(),
            victim_file.display(),
            victim_folder.display()
        ),
    )?;
    let script = scratch.path().join("escaping-driver.sh");
    std::fs::write(&script, ESCAPING_DRIVER)?;
    let cell = wrapped_cell(cell_name, &script, &targets.display().to_string())?;
    let out = tempfile::tempdir()?;
    let mut ctx = context(out.path());
    ctx.harness_binary = binary.clone();
    let result = tokio::runtime::Runtime::new()?.block_on(run_cell(&ctx, &cell));
    let said = std::fs::read_to_string(CellEvidence::new(&result.evidence_dir).driver_stdout())
        .unwrap_or_default();
    eprintln!(
        "{cell_name}: the escaping driver said {said:?}; the cell: {:?}",
        result.outcome
    );

    let mut escapes: Vec<String> = said
        .lines()
        .filter(|line| line.starts_with("escaped"))
        .map(str::to_string)
        .collect();
    if std::fs::read(&binary).ok() != Some(before) {
        escapes.push("the harness binary changed".into());
    }
    if cache.join("escape-probe").exists() {
        let _ = std::fs::remove_file(cache.join("escape-probe"));
        escapes.push("a file in the harness cache".into());
    }
    if std::fs::read_to_string(other_run.join("summary.json"))? != "{}" {
        escapes.push("another run's summary.json changed".into());
    }
    if std::fs::read_to_string(&victim_file)? != "root's" {
        escapes.push("the app-server wrote a root file through the driver's link".into());
    }
    if std::fs::read_dir(&victim_folder)?.next().is_some() {
        escapes.push("the app-server wrote a root folder through the driver's link".into());
    }
    if host_tmp.exists() {
        let _ = std::fs::remove_file(&host_tmp);
        escapes.push(format!("{} left in the host's /tmp", host_tmp.display()));
    }
    if let Some(pid) = survivor(&marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        escapes.push(format!("its child (pid {pid}) outlived the cell"));
    }
    if !said.contains("attacks done as uid") {
        return Err(format!("the escaping driver did not run (it said {said:?})").into());
    }
    if !escapes.is_empty() {
        return Err(format!("the driver left its cell: {escapes:?}").into());
    }
    match &result.outcome {
        CellOutcome::Graded { verdict, .. } if verdict.is_pass() => Ok(()),
        other => Err(format!("the cell's own command should still pass: {other:?}").into()),
    }
}

/// A live process whose command line holds `marker`.
fn survivor(marker: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline =
                std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(marker)
                .then_some(pid)
        })
}
