//! The environments, one [`EnvSpec`] each. Adding an environment is one entry here plus its
//! signature row (and its message constant) in `graders::signatures`, then the parts of
//! docs/environments.md generated from here (`sandbox::catalogue_doc`; see that doc).

use crate::kvm::{BWRAP_USERNS_RESTRICT, USERNS_RESTRICTED_PROFILE};
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
///
/// Longer than 100 lines on purpose: one literal per environment, read as a table and generated
/// into docs/environments.md; a function per entry would scatter the table.
pub fn all() -> Vec<EnvSpec> {
    vec![
        EnvSpec {
            name: "local",
            restricts: "nothing (the host as it is)",
            stands_for: "a developer machine or SSH host",
            message: None,
            signature_row: None,
            container: None,
            vm: None,
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
            signature_row: None,
            container: Some(container_base()),
            vm: None,
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
            signature_row: Some("bwrap-loopback-rtm-newaddr"),
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
            vm: None,
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
            signature_row: Some("bwrap-uid-map"),
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                capabilities: Vec::new(),
                bwrap: BwrapAccess::ExecuteOnly,
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bwrap-namespace-no-permission"),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(EPERM),
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bwrap-make-root-slave"),
            container: Some(ContainerSpec {
                seccomp: vec![flags_rule("mount", 3, MS_REC_SLAVE, EACCES)],
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bwrap-mount-proc"),
            container: Some(ContainerSpec {
                proc_masked: true,
                ..container_base()
            }),
            vm: None,
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
            name: "devpts-denied",
            restricts: "as container + seccomp: mount() with exactly MS_NOSUID|MS_NOEXEC (the \
                        devpts mount of bubblewrap's --dev) -> EACCES, as an LSM refuses it",
            stands_for: "SELinux hosts (Fedora) and rootless Podman with --userns=keep-id",
            message: Some(MOUNT_DEVPTS_SIGNATURE),
            signature_row: Some("bwrap-mount-devpts"),
            container: Some(ContainerSpec {
                seccomp: vec![SeccompRule {
                    syscall: "mount",
                    errno: EACCES,
                    arg: Some(ArgMatch {
                        index: 3,
                        op: ArgOp::Equals(MS_NOSUID_NOEXEC),
                    }),
                }],
                ..container_base()
            }),
            vm: None,
            expected_probe: ExpectedProbe::SUCCEEDS,
            expected_command: ExpectedProbe::fails_with(MOUNT_DEVPTS_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::PerCommand,
            cause: "bubblewrap's `--dev /dev` mounts a fresh devpts (flags MS_NOSUID|MS_NOEXEC) on /newroot/dev/pts, and an LSM \
refuses it with EACCES (SELinux on Fedora; rootless Podman with --userns=keep-id; here: a seccomp rule on exactly \
those flags). Codex's start-up probe passes no --dev, so it passes and nothing warns; but the fs helper of a \
restricted-read thread/start and every sandboxed command pass --dev /dev, so thread/start fails under the \
legacy profile and, under the fixed one, every command fails before it runs (apply_patch too).",
        },
        EnvSpec {
            name: "proc-sys-kernel-masked",
            restricts: "as container + /proc/sys/kernel masked (an empty read-only tmpfs over the \
                        folder)",
            stands_for: "Termux/Android, hardened services that hide kernel tunables, old gVisor",
            message: Some(OVERFLOWUID_SIGNATURE),
            signature_row: Some("bwrap-overflowids-unreadable"),
            container: Some(ContainerSpec {
                masked_paths: vec!["/proc/sys/kernel"],
                ..container_base()
            }),
            vm: None,
            expected_probe: ExpectedProbe::fails_with(OVERFLOWUID_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(OVERFLOWUID_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "/proc/sys/kernel is masked (an empty read-only tmpfs over the folder; Termux/Android, hardened services and old \
gVisor hide it too), so bubblewrap cannot read /proc/sys/kernel/overflowuid. It reads it before it parses its \
arguments (docs/environments.md, bubblewrap's order of operations), so every bubblewrap run but a bare \
`bwrap --version` fails the same way: Codex's start-up probe (its text is not one of the four Codex recognises, so \
no warning), the legacy fs helper (thread/start fails) and every command of the fixed profile. Masking the file \
alone gives `Can't parse` instead (its mask is /dev/null, which reads empty).",
        },
        EnvSpec {
            name: "initramfs-root",
            restricts: "as container + seccomp: pivot_root -> EINVAL (what the kernel answers when \
                        the root is an initramfs)",
            stands_for: "systems whose root filesystem is an initramfs (Unraid)",
            message: Some(PIVOT_ROOT_INITRAMFS_SIGNATURE),
            signature_row: Some("bwrap-pivot-root-initramfs"),
            container: Some(ContainerSpec {
                seccomp: vec![SeccompRule {
                    syscall: "pivot_root",
                    errno: EINVAL,
                    arg: None,
                }],
                ..container_base()
            }),
            vm: None,
            expected_probe: ExpectedProbe::fails_with(PIVOT_ROOT_INITRAMFS_SIGNATURE),
            expected_command: ExpectedProbe::fails_with(PIVOT_ROOT_INITRAMFS_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "bubblewrap pivots its new root onto a tmpfs with pivot_root(2), which the kernel answers with EINVAL when the \
current root is an initramfs or rootfs (Unraid boots that way; here: a seccomp rule answering EINVAL). bubblewrap \
always pivots, whatever its arguments, so Codex's start-up probe fails (no warning: not one of its four texts), \
the legacy fs helper fails thread/start, and every command of the fixed profile fails before it runs.",
        },
        EnvSpec {
            name: "userns-limit",
            restricts: "as container + seccomp: CLONE_NEWUSER on unshare/clone -> ENOSPC \
                        (what the kernel answers past user.max_user_namespaces), clone3 -> ENOSYS",
            stands_for: "nested sandboxes (Codex inside a bwrap or a rootless container) and \
                         hosts with user.max_user_namespaces=0",
            message: Some(USERNS_LIMIT_MESSAGE),
            signature_row: Some("bwrap-namespace-create-failed"),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(ENOSPC),
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bwrap-no-userns-kernel"),
            container: Some(ContainerSpec {
                seccomp: user_namespace_rules(EINVAL),
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bwrap-unexpected-capabilities"),
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                ambient_capabilities: true,
                ..container_base()
            }),
            vm: None,
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
            signature_row: Some("bubblewrap-unavailable"),
            container: Some(ContainerSpec {
                bwrap: BwrapAccess::AllHidden,
                ..container_base()
            }),
            vm: None,
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
            signature_row: None,
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                capabilities: Vec::new(),
                bwrap: BwrapAccess::SystemHidden,
                ..container_base()
            }),
            vm: None,
            expected_probe: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_command: ExpectedProbe::exits_with(127, BWRAP_NOT_EXECUTABLE_SIGNATURE),
            expected_retry: None,
            fails_at: FailsAt::Never,
            cause: "A non-root uid without capabilities, with no_new_privs and no system bubblewrap. Codex warns that it could \
not find bubblewrap on PATH and uses its bundled one; this kernel allows unprivileged user namespaces, so the \
bundled bubblewrap works: the write runs and is refused (pass). Where a command does not run at all and says \
nothing, the graders find no refusal and no probe file and never call it a pass.",
        },
        EnvSpec {
            name: "apparmor-userns",
            restricts: "a virtual machine on Debian 13's kernel 6.12 with AppArmor 4.1: uid 1000 \
                        confined by a profile that may create user namespaces but holds no \
                        capability in them; no bwrap profile",
            stands_for: "Ubuntu 24.04 hosts and GitHub's ubuntu-24.04 runners \
                         (kernel.apparmor_restrict_unprivileged_userns=1), without the \
                         bwrap-userns-restrict profile",
            message: Some(USERNS_MESSAGE_BWRAP_012),
            signature_row: Some("bwrap-namespace-no-permission"),
            container: None,
            vm: Some(VmSpec {
                apparmor_profiles: &[USERNS_RESTRICTED_PROFILE],
                confined_by: Some(USERNS_RESTRICTED_PROFILE),
                ..vm_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_MESSAGE_BWRAP_012),
            expected_command: ExpectedProbe::fails_with(USERNS_MESSAGE_BWRAP_012),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "A real AppArmor decision on a real kernel. Ubuntu's kernel attaches the `unprivileged_userns` profile \
(`audit deny capability`) to an unconfined task that creates a user namespace; Debian's kernel has AppArmor 4's \
user-namespace mediation but not that sysctl, so every process here runs under a profile with the same rules \
(sandbox::kvm, `userns-restricted.apparmor`). bubblewrap creates its user namespace together with the mount and \
network namespaces it needs CAP_SYS_ADMIN in; AppArmor refuses the capability (audit: `capname=\"sys_admin\"`), \
so the clone fails and bubblewrap says it has no permission. Ubuntu's users report the later steps failing instead \
(`loopback: Failed RTM_NEWADDR`, `setting up uid map`): there the profile is attached while the namespaces are \
created, here before.",
        },
        EnvSpec {
            name: "apparmor-userns-bwrap-profile",
            restricts: "as apparmor-userns + Debian 13's bwrap-userns-restrict profile, which \
                        exempts /usr/bin/bwrap (and not Codex's bundled bubblewrap)",
            stands_for: "Ubuntu 24.04 with apparmor-profiles' bwrap-userns-restrict loaded (what \
                         openai/codex's own smoke workflow runs)",
            message: None,
            signature_row: None,
            container: None,
            vm: Some(VmSpec {
                apparmor_profiles: &[USERNS_RESTRICTED_PROFILE, BWRAP_USERNS_RESTRICT],
                confined_by: Some(USERNS_RESTRICTED_PROFILE),
                ..vm_base()
            }),
            expected_probe: ExpectedProbe::SUCCEEDS,
            expected_command: ExpectedProbe::SUCCEEDS,
            expected_retry: None,
            fails_at: FailsAt::Never,
            cause: "The `bwrap` profile attaches to /usr/bin/bwrap by path and allows it capabilities and user namespaces, so \
Codex works while it finds the system bubblewrap on PATH (it prefers it). A bubblewrap at any other path, such \
as the Codex package's codex-resources/bwrap that Codex falls back to when /usr/bin is not on the app-server's \
PATH, stays under the restriction and fails as in apparmor-userns.",
        },
        EnvSpec {
            name: "max-userns-zero",
            restricts: "a virtual machine on Debian 13's kernel 6.12, uid 1000, \
                        user.max_user_namespaces=0",
            stands_for: "hosts that set user.max_user_namespaces=0 (hardening guides, some hosted \
                         sandboxes)",
            message: Some(USERNS_LIMIT_MESSAGE),
            signature_row: Some("bwrap-namespace-create-failed"),
            container: None,
            vm: Some(VmSpec {
                sysctls: &[("user.max_user_namespaces", "0")],
                ..vm_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_LIMIT_MESSAGE),
            expected_command: ExpectedProbe::fails_with(USERNS_LIMIT_MESSAGE),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "The kernel's limit on user namespaces is zero, for every user, root included: bubblewrap's clone with \
CLONE_NEWUSER fails with ENOSPC, which bubblewrap reports as the nesting depth or the limit exceeded.",
        },
        EnvSpec {
            name: "userns-clone-off",
            restricts: "a virtual machine on Debian 13's kernel 6.12, uid 1000, \
                        kernel.unprivileged_userns_clone=0",
            stands_for: "Debian hosts with unprivileged user namespaces turned off (Debian's own \
                         sysctl; the default before Debian 11)",
            message: Some(USERNS_MESSAGE_BWRAP_012),
            signature_row: Some("bwrap-namespace-no-permission"),
            container: None,
            vm: Some(VmSpec {
                sysctls: &[("kernel.unprivileged_userns_clone", "0")],
                ..vm_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_MESSAGE_BWRAP_012),
            expected_command: ExpectedProbe::fails_with(USERNS_MESSAGE_BWRAP_012),
            expected_retry: None,
            fails_at: FailsAt::StartUp,
            cause: "Debian's kernel patch refuses CLONE_NEWUSER to a task without CAP_SYS_ADMIN when \
kernel.unprivileged_userns_clone is 0: bubblewrap (not setuid) gets EPERM and says it has no permission.",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell's driver beside a virtual machine's app-server stays on the host with the tap's
    /// socket (a guest process cannot reach it); in a container it runs in the container.
    #[test]
    fn the_driver_runs_on_the_host_everywhere_but_in_a_container() {
        for env in all() {
            assert_eq!(
                env.driver_on_host(),
                env.container.is_none(),
                "{}",
                env.name
            );
            if env.vm.is_some() {
                assert!(env.driver_on_host(), "{}", env.name);
            }
        }
    }
    use graders::signatures::{classify_line, SignatureClass, SIGNATURES};

    /// The texts of an environment the graders must name: its message and its canaries'
    /// signatures, but for the shell's `sh: 1: bwrap: Permission denied`, the canaries' own
    /// wording that Codex never prints.
    fn texts_of(env: &EnvSpec) -> Vec<&'static str> {
        [
            env.message,
            env.expected_probe.stderr_signature,
            env.expected_command.stderr_signature,
        ]
        .into_iter()
        .flatten()
        .filter(|s| *s != BWRAP_NOT_EXECUTABLE_SIGNATURE)
        .collect()
    }

    /// The safety net for a new environment: its message and its canaries' signatures are each
    /// classified by the row its spec names, a launcher-failure row of its own in
    /// `graders::signatures` — the generic `bwrap-fatal-other` row (any `bwrap: ` line) does not
    /// count.
    #[test]
    fn every_message_users_see_is_named_by_its_own_signature_row() {
        for env in all().into_iter().filter(|e| e.fails_at != FailsAt::Never) {
            let row = env.signature_row.unwrap_or_else(|| {
                panic!(
                    "{} fails Codex but names no signature row: add one in graders::signatures \
                     (and a message constant) and name it in its spec",
                    env.name
                )
            });
            for text in texts_of(&env) {
                let found =
                    classify_line(text).unwrap_or_else(|| panic!("graders do not know `{text}`"));
                assert_eq!(
                    found.class,
                    SignatureClass::LauncherFailure,
                    "{}: `{text}` is {}",
                    env.name,
                    found.name
                );
                assert_ne!(
                    found.name, "bwrap-fatal-other",
                    "{}: `{text}` is only caught by the generic row: add a signature row \
                     (and a message constant) for it in graders::signatures",
                    env.name
                );
                assert_eq!(found.name, row, "{}: `{text}`", env.name);
            }
        }
    }

    /// A new environment's message must not be caught by an older row of another cause, even
    /// one that comes later in the table: `pivot_root: Permission denied`'s row (an LSM) once
    /// caught `pivot_root: Invalid argument` (an initramfs root), and every test passed.
    #[test]
    fn no_row_of_another_cause_matches_an_environments_message() {
        for env in all() {
            let Some(own) = env.signature_row else {
                continue;
            };
            for text in texts_of(&env) {
                let others: Vec<&str> = SIGNATURES
                    .iter()
                    .filter(|row| row.name != own && row.name != "bwrap-fatal-other")
                    .filter(|row| row.class == SignatureClass::LauncherFailure)
                    .filter(|row| row.matches(text))
                    .map(|row| row.name)
                    .collect();
                assert!(
                    others.is_empty(),
                    "{}: `{text}` is also matched by {others:?}, rows of another cause than \
                     `{own}`: narrow them",
                    env.name
                );
            }
        }
    }

    #[test]
    fn an_lsm_refused_pivot_root_and_an_initramfs_root_are_told_apart() {
        let denied = classify_line("bwrap: pivot_root: Permission denied").unwrap();
        let initramfs = classify_line(PIVOT_ROOT_INITRAMFS_SIGNATURE).unwrap();
        assert_eq!(denied.name, "bwrap-pivot-root-denied");
        assert_eq!(initramfs.name, "bwrap-pivot-root-initramfs");
        assert!(!denied.matches(PIVOT_ROOT_INITRAMFS_SIGNATURE));
    }

    #[test]
    fn every_container_environment_has_a_cause() {
        for spec in all() {
            if spec.container.is_some() {
                assert!(!spec.cause.is_empty(), "{}", spec.name);
            }
        }
    }
}
