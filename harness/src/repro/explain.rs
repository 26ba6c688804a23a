//! Why each environment's failure happens, for `harness repro ENV`: the cause in a few
//! sentences, then what the spec says (platform, mechanism, message, when it fails Codex).

use sandbox::spec::EnvSpec;

/// The cause, per environment (measured with Codex 0.169.0 and Debian's bubblewrap 0.8.0).
fn cause(environment: &str) -> &'static str {
    match environment {
        "container" => "Nothing breaks here: bubblewrap creates its user namespace, which has every capability, so \
it can set up loopback, mount /proc and refuse the write with a read-only bind. This is the control.",
        "daytona" => "With restricted reads (`:root`=none), Codex loads AGENTS.md through its filesystem helper, which it runs \
under bubblewrap with --unshare-user --unshare-net. In the new network namespace bubblewrap adds the loopback \
address with a netlink sendto(); this runtime refuses that call (here: a seccomp rule, sendto with a 12-byte \
sockaddr_nl -> EPERM), so the helper dies and thread/start fails. Dropping CAP_NET_ADMIN alone does not do this: \
the new user namespace has every capability. The fix gives planning full-disk read inside an external sandbox \
(no helper, network as configured), so thread/start succeeds, the model's write runs in Codex's sandbox, and the \
sandbox refuses it (Read-only file system). With the network disabled every command gets --unshare-net and fails.",
        "daytona-uidmap" => "bubblewrap runs as a non-root uid and is non-dumpable (here: an execute-only copy, mode 0711, bound over \
the bwrap Codex uses; exec of an unreadable binary clears the dumpable flag). /proc/self/uid_map of a \
non-dumpable process belongs to root, so bubblewrap's write of its uid map fails with EACCES. The full-read \
profile lets thread/start succeed (no helper), but every sandboxed command still needs bubblewrap, so the \
model's write never runs: Codex tells the model the bwrap error, and the grader calls it sandbox-failed-to-start.",
        "userns-blocked" => "Docker's default seccomp profile refuses clone/unshare with CLONE_NEWUSER (EPERM; clone3 answers ENOSYS so \
the C library falls back to clone). bubblewrap cannot create its user namespace, so nothing sandboxed runs: the \
legacy fs helper fails thread/start, and the fixed profile's commands all fail before they run.",
        "lsm-mount-denied" => "User namespaces are allowed, but the first mount bubblewrap makes in its new mount namespace (making / a \
recursive slave, MS_REC|MS_SLAVE) is refused with EACCES, as AppArmor's docker-default profile, LXC without \
nesting or containerd's AppArmor profile in Kubernetes refuse it (here: a seccomp rule on mount's flags). \
Codex's start-up probe fails too, but its text is not one of the four Codex recognises, so there is no \
warning; the legacy fs helper fails thread/start and every command of the fixed profile fails.",
        "proc-masked" => "Docker and Podman mask parts of /proc (maskedPaths, readonlyPaths). The kernel then refuses a fresh proc mount \
in a new user namespace (it would reveal what the masks hide), so `--proc /proc` fails with `Can't mount proc on \
/newroot/proc`. Codex looks for `/newroot/proc` in bubblewrap's stderr and retries without --proc; the retry \
runs the command (without a fresh /proc), so the write is attempted and refused: pass. bubblewrap 0.12 words it \
`Can't mount proc on /proc`, which defeats that retry; Debian 12 has no bubblewrap >= 0.12, so the fake app-server \
simulates that wording (FAKE_APP_SERVER_BWRAP_WORDING=0.12) to show it.",
        "userns-limit" => "Creating the user namespace answers ENOSPC, what the kernel answers past user.max_user_namespaces or the \
nesting depth (Codex inside another sandbox; here: a seccomp rule). Codex's start-up probe does not recognise \
the text; the legacy fs helper fails thread/start, and every command of the fixed profile fails.",
        "no-userns-kernel" => "Creating the user namespace answers EINVAL, what a kernel without CONFIG_USER_NS (or WSL1) answers (here: a \
seccomp rule). bubblewrap says the kernel does not support user namespaces; nothing sandboxed runs.",
        "ambient-caps" => "The process runs as a non-root uid that holds capabilities (ambient ones survive exec). A bubblewrap that is \
not setuid refuses to run with capabilities it did not expect, before doing anything, so nothing sandboxed \
runs.",
        "no-bwrap" => "No bubblewrap can be executed: /usr/bin/bwrap and the Codex package's codex-resources/bwrap are each covered \
by an empty non-executable file. Codex warns at start-up that it will use its bundled bubblewrap (which is not \
there either); then its sandbox helper panics (exit 101, `bubblewrap is unavailable`) for the legacy fs helper, \
so thread/start fails, and for every command of the fixed profile.",
        "hardened" => "A non-root uid without capabilities, with no_new_privs and no system bubblewrap. Codex warns that it could \
not find bubblewrap on PATH and uses its bundled one; this kernel allows unprivileged user namespaces, so the \
bundled bubblewrap works: the write runs and is refused (pass). Where a command does not run at all and says \
nothing, the graders find no refusal and no probe file and never call it a pass.",
        _ => "",
    }
}

pub fn explanation(spec: &EnvSpec) -> String {
    let mut text = cause(spec.name).to_string();
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(&format!(
        "Stands for: {}. Mechanism here: {}. Codex's users see: {}. It fails Codex {}.",
        spec.stands_for,
        spec.restricts,
        spec.message.unwrap_or("nothing (Codex works)"),
        spec.fails_at.describe()
    ));
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_container_environment_has_a_cause() {
        for spec in sandbox::catalogue::all() {
            if spec.container.is_some() {
                assert!(!super::cause(spec.name).is_empty(), "{}", spec.name);
            }
        }
    }
}
