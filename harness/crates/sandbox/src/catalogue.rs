//! The environments, one [`EnvSpec`] each. Adding an environment is one entry here plus its
//! signature row (and its message constant) in `graders::signatures` (see
//! docs/environments.md).

use crate::spec::*;
use anyhow::{bail, Result};
use graders::signatures::messages::*;

/// The environment names, in listing order.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|s| s.name).collect()
}

/// The spec of `name`; an unknown name is an error naming the known ones.
pub fn spec(name: &str) -> Result<EnvSpec> {
    match all().into_iter().find(|s| s.name == name) {
        Some(found) => Ok(found),
        None => bail!(
            "unknown environment `{name}` (known: {})",
            names().join(", ")
        ),
    }
}

/// Every environment, in listing order.
pub fn all() -> Vec<EnvSpec> {
    vec![
        EnvSpec {
            name: "local",
            restricts: "nothing (the host as it is)",
            stands_for: "a developer machine or SSH host",
            message: None,
            container: None,
            expected_probe: ExpectedProbe::SUCCEEDS,
            expected_command: ExpectedProbe::SUCCEEDS,
            expected_retry: None,
            fails_at: FailsAt::Never,
            cause: "",
        },
        EnvSpec {
            name: "container",
            restricts:
                "read-only host root, Docker's default capabilities (no NET_ADMIN, no SYS_ADMIN)",
            stands_for: "a plain Docker container (the control: Codex works)",
            message: None,
            container: Some(container_base()),
            expected_probe: ExpectedProbe::SUCCEEDS,
            expected_command: ExpectedProbe::SUCCEEDS,
            expected_retry: None,
            fails_at: FailsAt::Never,
            cause: "Nothing breaks here: bubblewrap creates its user namespace, which has every capability, so \
it can set up loopback, mount /proc and refuse the write with a read-only bind. This is the control.",
        },
        EnvSpec {
            name: "daytona",
            restricts:
                "as container + seccomp: sendto(addrlen=12) -> EPERM (netlink RTM_NEWADDR refused)",
            stands_for: "the Daytona sandbox where loopback set-up is refused",
            message: Some(RTM_NEWADDR_SIGNATURE),
            container: Some(ContainerSpec {
                seccomp: vec![SeccompRule {
                    syscall: "sendto",
                    errno: EPERM,
                    arg: Some(ArgMatch {
                        index: 5,
                        op: ArgOp::Equals(SOCKADDR_NL_LEN),
                    }),
                }],
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(RTM_NEWADDR_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(RTM_NEWADDR_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "With restricted reads (`:root`=none), Codex loads AGENTS.md through its filesystem helper, which it runs \
under bubblewrap with --unshare-user --unshare-net. In the new network namespace bubblewrap adds the loopback \
address with a netlink sendto(); this runtime refuses that call (here: a seccomp rule, sendto with a 12-byte \
sockaddr_nl -> EPERM), so the helper dies and thread/start fails. Dropping CAP_NET_ADMIN alone does not do this: \
the new user namespace has every capability. The fix gives planning full-disk read inside an external sandbox \
(no helper, network as configured), so thread/start succeeds, the model's write runs in Codex's sandbox, and the \
sandbox refuses it (Read-only file system). With the network disabled every command gets --unshare-net and fails.",
        },
        EnvSpec {
            name: "daytona-uidmap",
            restricts:
                "as container + uid/gid 1000, no capabilities, execute-only (non-dumpable) bwrap",
            stands_for: "the newer Daytona image where bubblewrap cannot write its uid map",
            message: Some(UID_MAP_SIGNATURE),
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                capabilities: Vec::new(),
                bwrap: BwrapAccess::ExecuteOnly,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(UID_MAP_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(UID_MAP_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "bubblewrap runs as a non-root uid and is non-dumpable (here: an execute-only copy, mode 0711, bound over \
the bwrap Codex uses; exec of an unreadable binary clears the dumpable flag). /proc/self/uid_map of a \
non-dumpable process belongs to root, so bubblewrap's write of its uid map fails with EACCES. The full-read \
profile lets thread/start succeed (no helper), but every sandboxed command still needs bubblewrap, so the \
model's write never runs: Codex tells the model the bwrap error, and the grader calls it sandbox-failed-to-start.",
        },
        EnvSpec {
            name: "userns-blocked",
            restricts:
                "as container + seccomp: CLONE_NEWUSER on unshare/clone -> EPERM, clone3 -> ENOSYS",
            stands_for: "Docker's default seccomp profile (user namespaces refused)",
            message: Some(USERNS_MESSAGE),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(EPERM),
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(USERNS_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "Docker's default seccomp profile refuses clone/unshare with CLONE_NEWUSER (EPERM; clone3 answers ENOSYS so \
the C library falls back to clone). bubblewrap cannot create its user namespace, so nothing sandboxed runs: the \
legacy fs helper fails thread/start, and the fixed profile's commands all fail before they run.",
        },
        EnvSpec {
            name: "lsm-mount-denied",
            restricts: "as container + seccomp: mount() with MS_REC|MS_SLAVE -> EACCES (user \
                        namespaces allowed, the first mount refused, as an LSM does)",
            stands_for: "AppArmor docker-default with seccomp unconfined, LXC without nesting, \
                         Kubernetes pods under containerd's AppArmor profile",
            message: Some(MOUNT_SLAVE_SIGNATURE),
            container: Some(ContainerSpec {
                seccomp: vec![flags_rule("mount", 3, MS_REC_SLAVE, EACCES)],
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(MOUNT_SLAVE_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(MOUNT_SLAVE_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "User namespaces are allowed, but the first mount bubblewrap makes in its new mount namespace (making / a \
recursive slave, MS_REC|MS_SLAVE) is refused with EACCES, as AppArmor's docker-default profile, LXC without \
nesting or containerd's AppArmor profile in Kubernetes refuse it (here: a seccomp rule on mount's flags). \
Codex's start-up probe fails too, but its text is not one of the four Codex recognises, so there is no \
warning; the legacy fs helper fails thread/start and every command of the fixed profile fails.",
        },
        EnvSpec {
            name: "proc-masked",
            restricts: "as container + the OCI default masked and read-only /proc paths (user \
                        namespaces allowed): a fresh proc cannot be mounted",
            stands_for: "Docker and Podman defaults (masked /proc), hardened containers",
            message: Some(MOUNT_PROC_SIGNATURE),
            container: Some(ContainerSpec {
                proc_masked: true,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::SUCCEEDS,
            expected_command: ExpectedProbe::fails_with(MOUNT_PROC_SIGNATURE),
            // Without `--proc /proc` nothing is mounted on /proc, so the command runs.
            expected_retry: Some(ExpectedProbe::SUCCEEDS),
            fails_at: FailsAt::PerCommandRescuedByRetry,
            cause: "Docker and Podman mask parts of /proc (maskedPaths, readonlyPaths). The kernel then refuses a fresh proc mount \
in a new user namespace (it would reveal what the masks hide), so `--proc /proc` fails with `Can't mount proc on \
/newroot/proc`. Codex looks for `/newroot/proc` in bubblewrap's stderr and retries without --proc; the retry \
runs the command (without a fresh /proc), so the write is attempted and refused: pass. bubblewrap 0.12 words it \
`Can't mount proc on /proc`, which defeats that retry; Debian 12 has no bubblewrap >= 0.12, so the fake app-server \
simulates that wording (FAKE_APP_SERVER_BWRAP_WORDING=0.12) to show it.",
        },
        EnvSpec {
            name: "userns-limit",
            restricts: "as container + seccomp: CLONE_NEWUSER on unshare/clone -> ENOSPC \
                        (what the kernel answers past user.max_user_namespaces), clone3 -> ENOSYS",
            stands_for: "nested sandboxes (Codex inside a bwrap or a rootless container) and \
                         hosts with user.max_user_namespaces=0",
            message: Some(USERNS_LIMIT_MESSAGE),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(ENOSPC),
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_LIMIT_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(USERNS_LIMIT_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "Creating the user namespace answers ENOSPC, what the kernel answers past user.max_user_namespaces or the \
nesting depth (Codex inside another sandbox; here: a seccomp rule). Codex's start-up probe does not recognise \
the text; the legacy fs helper fails thread/start, and every command of the fixed profile fails.",
        },
        EnvSpec {
            name: "no-userns-kernel",
            restricts: "as container + seccomp: CLONE_NEWUSER on unshare/clone -> EINVAL (what a \
                        kernel without CONFIG_USER_NS answers), clone3 -> ENOSYS",
            stands_for: "WSL1 and kernels built without user namespaces",
            message: Some(NO_USERNS_KERNEL_MESSAGE),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(EINVAL),
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(NO_USERNS_KERNEL_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(NO_USERNS_KERNEL_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "Creating the user namespace answers EINVAL, what a kernel without CONFIG_USER_NS (or WSL1) answers (here: a \
seccomp rule). bubblewrap says the kernel does not support user namespaces; nothing sandboxed runs.",
        },
        EnvSpec {
            name: "ambient-caps",
            restricts: "as container + uid/gid 1000 holding Docker's default capabilities in \
                        every set, ambient included (they survive exec)",
            stands_for: "hosted sandboxes that run a non-root user with capabilities",
            message: Some(AMBIENT_CAPS_SIGNATURE),
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                ambient_capabilities: true,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(AMBIENT_CAPS_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(AMBIENT_CAPS_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "The process runs as a non-root uid that holds capabilities (ambient ones survive exec). A bubblewrap that is \
not setuid refuses to run with capabilities it did not expect, before doing anything, so nothing sandboxed \
runs.",
        },
        EnvSpec {
            name: "no-bwrap",
            restricts: "as container + an empty non-executable file over /usr/bin/bwrap and over \
                        the Codex package's codex-resources/bwrap (no bubblewrap at all)",
            stands_for: "an image without bubblewrap and a Codex package without codex-resources",
            message: Some(NO_BWRAP_MESSAGE),
            container: Some(ContainerSpec {
                bwrap: BwrapAccess::AllHidden,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_command: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "No bubblewrap can be executed: /usr/bin/bwrap and the Codex package's codex-resources/bwrap are each covered \
by an empty non-executable file. Codex warns at start-up that it will use its bundled bubblewrap (which is not \
there either); then its sandbox helper panics (exit 101, `bubblewrap is unavailable`) for the legacy fs helper, \
so thread/start fails, and for every command of the fixed profile.",
        },
        EnvSpec {
            name: "hardened",
            restricts: "as container + uid/gid 1000, every capability dropped, no_new_privs, an \
                        empty non-executable file over /usr/bin/bwrap (Codex's bundled one stays)",
            stands_for: "hardened images (non-root, cap_drop ALL, no-new-privileges, no \
                         bubblewrap installed)",
            message: Some(NO_SYSTEM_BWRAP_WARNING),
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                capabilities: Vec::new(),
                bwrap: BwrapAccess::SystemHidden,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_command: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::Never,
            cause: "A non-root uid without capabilities, with no_new_privs and no system bubblewrap. Codex warns that it could \
not find bubblewrap on PATH and uses its bundled one; this kernel allows unprivileged user namespaces, so the \
bundled bubblewrap works: the write runs and is refused (pass). Where a command does not run at all and says \
nothing, the graders find no refusal and no probe file and never call it a pass.",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use graders::signatures::{classify_line, SignatureClass};

    /// The safety net for a new environment: its message and its canaries' signatures must each
    /// be classified by a row of their own in `graders::signatures` — the generic
    /// `bwrap-fatal-other` row (any `bwrap: ` line) does not count.
    #[test]
    fn every_message_users_see_is_a_launcher_failure_for_the_graders() {
        for env in all().into_iter().filter(|e| e.fails_at != FailsAt::Never) {
            let signatures = [
                env.message,
                env.expected_probe.stderr_signature,
                env.expected_command.stderr_signature,
            ];
            // The shell's `exec: bwrap: Permission denied` is the canaries' own wording, never
            // what Codex shows; the graders must not see it as a refusal, though.
            for signature in signatures
                .into_iter()
                .flatten()
                .filter(|s| *s != BWRAP_NOT_EXECUTABLE_SIGNATURE)
            {
                let found = classify_line(signature)
                    .unwrap_or_else(|| panic!("graders do not know `{signature}`"));
                assert_eq!(
                    found.class,
                    SignatureClass::LauncherFailure,
                    "{}: `{signature}` is {}",
                    env.name,
                    found.name
                );
                assert_ne!(
                    found.name, "bwrap-fatal-other",
                    "{}: `{signature}` is only caught by the generic row: add a signature row \
                     (and a message constant) for it in graders::signatures",
                    env.name
                );
            }
        }
    }

    #[test]
    fn every_container_environment_has_a_cause() {
        for spec in all() {
            if spec.container.is_some() {
                assert!(!spec.cause.is_empty(), "{}", spec.name);
            }
        }
    }

    /// docs/environments.md documents every environment in its table, by name.
    #[test]
    fn the_environments_doc_has_a_row_for_every_environment() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/environments.md");
        let text = std::fs::read_to_string(&doc).unwrap();
        for name in names() {
            assert!(
                text.contains(&format!("| `{name}` |")),
                "{} has no table row for `{name}`",
                doc.display()
            );
        }
    }
}
