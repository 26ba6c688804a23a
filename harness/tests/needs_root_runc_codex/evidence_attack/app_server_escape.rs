//! A `local` driver that has its app-server act for it outside the cell: under a root harness
//! the driver runs as a uid of its own, but it can start its `codex` through the tap and ask it
//! to `command/exec` with `sandboxPolicy: dangerFullAccess`. The app-server must not run that
//! command with more power than the cell's own folders give: a root-only folder outside the
//! cell stays unwritten, the harness's evidence stays unread, and the cell is still graded as
//! the driver's own command deserves.

use super::{context, wrapped_cell};
use libtest_mimic::Failed;
use matrix::cell::run_cell;
use report::layout::CellEvidence;
use report::outcome::CellOutcome;

/// The driver: `$1` its workspace, `$2` a root-only folder outside the cell, then the cell's
/// own command. It starts its `codex` through the tap, initializes it and asks it to run, with
/// full access, a command that writes the folder and copies the cell's transcript there; then
/// it runs the command.
const EXEC_ESCAPING_DRIVER: &str = r#"
workspace=$1; victim=$2; shift 2
cell=$(dirname "$(dirname "$workspace")")
python3 - "$CODEX_PATH" "$victim" "$cell" <<'PY'
import json, subprocess, sys
codex, victim, cell = sys.argv[1:4]
script = f"id -u; id -u > {victim}/exec-id; cp {cell}/transcript.jsonl {victim}/transcript-copy"
server = subprocess.Popen([codex, "app-server"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
def ask(id, method, params):
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id, "method": method,
                                   "params": params}) + "\n")
    server.stdin.flush()
    for line in server.stdout:
        message = json.loads(line)
        if message.get("id") == id:
            return message
    return None
print("exec-escape: initialize", ask(1, "initialize",
      {"clientInfo": {"name": "exec-escape", "version": "0"}}) is not None)
server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "initialized"}) + "\n")
server.stdin.flush()
print("exec-escape: command/exec", json.dumps(ask(2, "command/exec", {
    "command": ["sh", "-c", script], "sandboxPolicy": {"type": "dangerFullAccess"}})))
server.stdin.close()
try:
    server.wait(timeout=10)
except subprocess.TimeoutExpired:
    server.kill()
PY
echo "exec-escape: done as uid $(id -u)"
exec "$@"
"#;

/// Runs `cell_name` with the exec-escaping driver and checks the root-only folder afterwards.
pub fn a_drivers_command_exec_stays_in_its_cell(cell_name: &str) -> Result<(), Failed> {
    // Not below `/tmp` (private to both the driver and the app-server): a folder they see.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    // Root's, 0755: the driver's uid cannot write it; only an app-server acting as root can.
    let victim = scratch.path().join("victim-folder");
    std::fs::create_dir_all(&victim)?;
    std::fs::set_permissions(&victim, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let script = scratch.path().join("exec-escaping-driver.sh");
    std::fs::write(&script, EXEC_ESCAPING_DRIVER)?;
    let cell = wrapped_cell(cell_name, &script, &victim.display().to_string())?;
    let out = tempfile::tempdir()?;
    let result = tokio::runtime::Runtime::new()?.block_on(run_cell(&context(out.path()), &cell));
    let said = std::fs::read_to_string(CellEvidence::new(&result.evidence_dir).driver_stdout())
        .unwrap_or_default();
    eprintln!(
        "{cell_name}: the exec-escaping driver said {said:?}; the cell: {:?}",
        result.outcome
    );
    if !said.contains("exec-escape: command/exec") || !said.contains("exec-escape: done") {
        return Err(format!("the exec-escaping driver did not run (it said {said:?})").into());
    }
    if said.contains(r#""stdout": "0\n""#) {
        return Err(format!("the app-server ran the driver's command as root: {said:?}").into());
    }
    let landed: Vec<String> = std::fs::read_dir(&victim)?
        .flatten()
        .map(|entry| {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            format!(
                "{}: {:?}",
                entry.file_name().to_string_lossy(),
                text.lines().next()
            )
        })
        .collect();
    if !landed.is_empty() {
        return Err(format!(
            "the app-server ran the driver's command/exec outside the cell: {landed:?}"
        )
        .into());
    }
    match &result.outcome {
        CellOutcome::Graded { verdict, .. } if verdict.is_pass() => Ok(()),
        other => Err(format!("the cell's own command should still pass: {other:?}").into()),
    }
}
