//! The restricted environments as data: one [`EnvSpec`] per environment. Runtimes (runc, Docker)
//! render these specs; nothing about an environment is decided anywhere else.

use oci_spec::runtime::Capability;

/// CLONE_NEWUSER from `<linux/sched.h>`.
pub const CLONE_NEWUSER: u64 = 0x1000_0000;
/// errno values the seccomp rules answer with.
pub const EPERM: u32 = 1;
pub const EACCES: u32 = 13;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const ENOSYS: u32 = 38;
/// `MS_REC | MS_SLAVE` from `<linux/mount.h>`: bubblewrap's first mount makes `/` a recursive
/// slave.
pub const MS_REC_SLAVE: u64 = 0x4000 | (1 << 19);
/// `MS_NOSUID | MS_NOEXEC` from `<linux/mount.h>`: exactly the flags of bubblewrap's devpts
/// mount (`--dev`); no other mount of bubblewrap or of the container's processes uses them alone.
pub const MS_NOSUID_NOEXEC: u64 = 0x2 | 0x8;
/// `sizeof(struct sockaddr_nl)`: the address length of bubblewrap's RTM_NEWADDR `sendto`.
pub const SOCKADDR_NL_LEN: u64 = 12;

/// The start-up canary: what Codex's own start-up probe runs (always `--unshare-user`).
pub const CANARY: [&str; 7] = [
    "bwrap",
    "--unshare-user",
    "--unshare-net",
    "--ro-bind",
    "/",
    "/",
    "true",
];

/// The per-command canary: the namespace, `/dev` and `/proc` flags Codex 0.169.0 passes to
/// bubblewrap for every sandboxed command with the network off (see the sandbox facts doc), on a
/// full-read root. The start-up canary says nothing about these: `--proc /proc` is where a
/// masked /proc fails, and Codex itself starts.
pub const COMMAND_CANARY: &[&str] = &[
    "bwrap",
    "--as-pid-1",
    "--new-session",
    "--die-with-parent",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--proc",
    "/proc",
    "--cap-drop",
    "ALL",
    "--",
    "true",
];

/// The text Codex looks for in bubblewrap's stderr before it retries a command without
/// `--proc /proc` (its `--no-proc` fallback).
pub const NO_PROC_RETRY_TRIGGER: &str = "/newroot/proc";

/// The per-command canary as Codex retries it after `Can't mount proc on /newroot/proc`: the same
/// without `--proc /proc`.
pub fn retry_canary() -> Vec<&'static str> {
    let mut args = COMMAND_CANARY.to_vec();
    if let Some(at) = args.iter().position(|a| *a == "--proc") {
        args.drain(at..at + 2);
    }
    args
}

/// One restricted environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSpec {
    pub name: &'static str,
    /// The mechanism used here, in one line.
    pub restricts: &'static str,
    /// The real platform it stands for.
    pub stands_for: &'static str,
    /// The exact message a user of Codex sees there (`None`: Codex works).
    pub message: Option<&'static str>,
    /// The `graders::signatures` row that names this failure: the first row matching `message`
    /// and the canaries' signatures, and the only one of a specific cause that matches them.
    pub signature_row: Option<&'static str>,
    /// `None`: the host as it is; `Some`: an OCI container.
    pub container: Option<ContainerSpec>,
    /// `Some`: a virtual machine with a kernel of its own ([`crate::kvm`]); `container` is `None`.
    pub vm: Option<VmSpec>,
    /// What the start-up canary ([`CANARY`]) must do here.
    pub expected_probe: ExpectedProbe,
    /// What the per-command canary ([`COMMAND_CANARY`]) must do here.
    pub expected_command: ExpectedProbe,
    /// What Codex's `--no-proc` retry ([`retry_canary`]) must do, for an environment whose
    /// per-command canary prints [`NO_PROC_RETRY_TRIGGER`].
    pub expected_retry: Option<ExpectedProbe>,
    /// When it breaks Codex.
    pub fails_at: FailsAt,
    /// Why it fails the way it does, in a few sentences (`harness repro ENV` prints it); empty
    /// for `local`.
    pub cause: &'static str,
}

impl EnvSpec {
    /// The uid and gid its container runs processes as, when not root (`None`: the host, or a
    /// root container): the folders those processes write must be theirs.
    pub fn container_user(&self) -> Option<(u32, u32)> {
        let container = self.container.as_ref().map(|c| (c.uid, c.gid));
        let vm = self.vm.as_ref().map(|v| (v.uid, v.gid));
        container.or(vm).filter(|&(uid, _)| uid != 0)
    }

    /// Whether a cell's driver runs on the host: everywhere but in a container. In a virtual
    /// machine only the app-server runs on its kernel (what the environment restricts is the
    /// app-server's bubblewrap), and the driver stays beside the tap's socket, which a process
    /// in the guest cannot reach.
    pub fn driver_on_host(&self) -> bool {
        self.container.is_none()
    }
}

/// A virtual machine on a real Debian kernel: the guest image of `ci/kvm-guest-image` (Debian 13,
/// kernel 6.12 with AppArmor 4.1), booted once per process and environment by [`crate::kvm`].
/// Each field is kernel state set at boot, before any process of a cell runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSpec {
    /// The uid and gid the processes run as: the kernel's user-namespace restrictions apply to
    /// unprivileged users only.
    pub uid: u32,
    pub gid: u32,
    /// `(name, value)` written to `/proc/sys` at boot.
    pub sysctls: &'static [(&'static str, &'static str)],
    /// AppArmor profiles loaded at boot: a guest path, or one of [`crate::kvm`]'s own profiles.
    pub apparmor_profiles: &'static [&'static str],
    /// The AppArmor profile every process runs under (`None`: unconfined).
    pub confined_by: Option<&'static str>,
}

/// What every virtual machine starts from: uid and gid 1000, no sysctl, no profile.
pub fn vm_base() -> VmSpec {
    VmSpec {
        uid: 1000,
        gid: 1000,
        sysctls: &[],
        apparmor_profiles: &[],
        confined_by: None,
    }
}

/// When an environment breaks Codex 0.169.0's sandbox (measured with the real Codex; the
/// canaries prove the mechanism).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailsAt {
    /// Already at start-up: Codex's own start-up probe fails (Codex still starts; only four
    /// texts become a `configWarning`), a restricted-read `thread/start` fails in its fs helper,
    /// and every sandboxed command fails.
    StartUp,
    /// Per command: Codex's start-up probe passes (so it never warns), and what runs bubblewrap
    /// with the per-command flags fails: every sandboxed command, and a restricted-read
    /// `thread/start`, whose fs helper passes `--dev /dev` as commands do.
    PerCommand,
    /// The first try of every command fails, and Codex's `--no-proc` retry runs it.
    PerCommandRescuedByRetry,
    /// Codex's sandbox works (perhaps after a start-up warning).
    Never,
}

impl FailsAt {
    pub fn describe(self) -> &'static str {
        match self {
            FailsAt::StartUp => {
                "at start-up (Codex's start-up probe and a restricted-read thread/start fail) and on every sandboxed command"
            }
            FailsAt::PerCommand => {
                "per command (Codex's start-up probe passes, without a warning; a restricted-read thread/start fails in its fs helper, which passes the per-command flags)"
            }
            FailsAt::PerCommandRescuedByRetry => {
                "per command, then rescued: Codex retries without --proc /proc and the command runs"
            }
            FailsAt::Never => "never (Codex's sandbox works)",
        }
    }
}

/// How a container restricts its process. Rendered to an OCI config (runc) or to Docker options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// uid and gid of the process; `(0, 0)` is root.
    pub uid: u32,
    pub gid: u32,
    /// Capabilities in the bounding, effective and permitted sets.
    pub capabilities: Vec<Capability>,
    /// Also put the capabilities in the inheritable and ambient sets, so that a non-root process
    /// keeps them across `execve` (what some hosted sandboxes do).
    pub ambient_capabilities: bool,
    /// Seccomp rules on top of a default-allow filter (empty: no filter at all).
    pub seccomp: Vec<SeccompRule>,
    /// What happens to every bubblewrap Codex may use.
    pub bwrap: BwrapAccess,
    /// The masked and read-only /proc and /sys paths of the OCI / Docker / Podman defaults
    /// ([`MASKED_PATHS`], [`READONLY_PATHS`]); otherwise none.
    pub proc_masked: bool,
    /// More masked paths, on top of those: a folder is covered by an empty read-only tmpfs, a
    /// file by `/dev/null` (runc's and Docker's `maskedPaths`).
    pub masked_paths: Vec<&'static str>,
}

/// One container mechanism: a field of [`ContainerSpec`] and how each runtime renders it
/// (`sandbox::oci` for runc, `sandbox::docker` for Docker). docs/environments.md shows this list
/// (generated); a test holds it to the struct's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mechanism {
    pub field: &'static str,
    pub what: &'static str,
    pub runc: &'static str,
    pub docker: &'static str,
}

/// Every field of [`ContainerSpec`], in declaration order.
pub const MECHANISMS: &[Mechanism] = &[
    Mechanism {
        field: "uid, gid",
        what: "the user the processes run as (root: 0, 0)",
        runc: "`process.user`",
        docker: "`--user`, and `docker exec --user`",
    },
    Mechanism {
        field: "capabilities",
        what: "the bounding, effective and permitted sets (base: Docker's default set, no NET_ADMIN, no SYS_ADMIN)",
        runc: "`process.capabilities`",
        docker: "`--cap-drop ALL` plus one `--cap-add` each",
    },
    Mechanism {
        field: "ambient_capabilities",
        what: "the same set inheritable and ambient too, so a non-root uid keeps it across `execve`",
        runc: "`process.capabilities.inheritable` and `.ambient`",
        docker: "none: Docker has no option for ambient capabilities (the launcher refuses it)",
    },
    Mechanism {
        field: "seccomp",
        what: "rules on a default-allow filter: a system call (whose argument matches) fails with an errno",
        runc: "`linux.seccomp` (no rules: no filter)",
        docker: "`--security-opt seccomp=PROFILE`, the same JSON object (no rules: `unconfined`)",
    },
    Mechanism {
        field: "bwrap",
        what: "what becomes of the system and the bundled bubblewrap: usable, execute-only (0711), or hidden under an empty non-executable file",
        runc: "file binds over each (`sandbox::overlays`)",
        docker: "the same files bound, also through the `/bin` alias",
    },
    Mechanism {
        field: "proc_masked",
        what: "the OCI default masked and read-only /proc and /sys paths",
        runc: "`linux.maskedPaths`, `linux.readonlyPaths` (otherwise empty)",
        docker: "Docker's defaults (otherwise empty lists, as `systempaths=unconfined`)",
    },
    Mechanism {
        field: "masked_paths",
        what: "more masked paths: a folder gets an empty read-only tmpfs, a file /dev/null",
        runc: "appended to `linux.maskedPaths`",
        docker: "the host config's `MaskedPaths`",
    },
];

/// The bubblewraps inside a container: `/usr/bin/bwrap` (the system's, Debian's 0.8.0, which
/// Codex prefers) and the Codex package's `codex-resources/bwrap` (its bundled one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BwrapAccess {
    /// As on the host.
    Usable,
    /// An execute-only (0711) copy is bound over each, so that executing it as a non-root uid
    /// makes the process non-dumpable.
    ExecuteOnly,
    /// An empty, non-executable file is bound over the system one: PATH lookups skip it, and
    /// Codex falls back to its bundled one.
    SystemHidden,
    /// Both the system and the bundled one are covered by an empty, non-executable file.
    AllHidden,
}

/// The OCI runtime-spec / Docker / Podman default masked paths.
pub const MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];

/// The OCI runtime-spec / Docker / Podman default read-only paths.
pub const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// One seccomp rule: calls of `syscall` (whose argument matches `arg`, when given) fail with
/// `errno`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompRule {
    pub syscall: &'static str,
    pub errno: u32,
    pub arg: Option<ArgMatch>,
}

/// A seccomp argument comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgMatch {
    pub index: usize,
    pub op: ArgOp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgOp {
    /// `arg == value`
    Equals(u64),
    /// `arg & mask == value`
    MaskedEquals { mask: u64, value: u64 },
}

/// What the canary must do in an environment: its exit code and, for a failure, a line its
/// stderr must contain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExpectedProbe {
    pub exit_code: i32,
    pub stderr_signature: Option<&'static str>,
}

impl ExpectedProbe {
    pub(crate) const SUCCEEDS: ExpectedProbe = ExpectedProbe {
        exit_code: 0,
        stderr_signature: None,
    };

    pub(crate) const fn fails_with(signature: &'static str) -> ExpectedProbe {
        ExpectedProbe {
            exit_code: 1,
            stderr_signature: Some(signature),
        }
    }

    pub(crate) const fn exits_with(exit_code: i32, signature: &'static str) -> ExpectedProbe {
        ExpectedProbe {
            exit_code,
            stderr_signature: Some(signature),
        }
    }

    /// One line for tables: `exit 0` or `exit 1: <signature>`.
    pub fn describe(&self) -> String {
        match self.stderr_signature {
            None => format!("exit {}", self.exit_code),
            Some(signature) => format!("exit {}: {signature}", self.exit_code),
        }
    }
}

/// What the shell says (exit 127) when the only `bwrap` on PATH cannot be executed: the canaries
/// run `bwrap` through a PATH lookup, as Codex looks for the system one.
pub const BWRAP_NOT_EXECUTABLE_SIGNATURE: &str = "sh: 1: bwrap: Permission denied";

/// Docker's default capability set. It has neither CAP_NET_ADMIN nor CAP_SYS_ADMIN.
pub fn docker_default_capabilities() -> Vec<Capability> {
    vec![
        Capability::Chown,
        Capability::DacOverride,
        Capability::Fsetid,
        Capability::Fowner,
        Capability::Mknod,
        Capability::NetRaw,
        Capability::Setgid,
        Capability::Setuid,
        Capability::Setfcap,
        Capability::Setpcap,
        Capability::NetBindService,
        Capability::SysChroot,
        Capability::Kill,
        Capability::AuditWrite,
    ]
}

/// What every container starts from: root, Docker's default capabilities, no filter.
pub fn container_base() -> ContainerSpec {
    ContainerSpec {
        uid: 0,
        gid: 0,
        capabilities: docker_default_capabilities(),
        ambient_capabilities: false,
        seccomp: Vec::new(),
        bwrap: BwrapAccess::Usable,
        proc_masked: false,
        masked_paths: Vec::new(),
    }
}

/// Calls of `syscall` whose flags argument `index` carries every bit of `flags` fail with `errno`.
pub fn flags_rule(syscall: &'static str, index: usize, flags: u64, errno: u32) -> SeccompRule {
    SeccompRule {
        syscall,
        errno,
        arg: Some(ArgMatch {
            index,
            op: ArgOp::MaskedEquals {
                mask: flags,
                value: flags,
            },
        }),
    }
}

/// Refuse new user namespaces with `errno` on `unshare` and `clone`; `clone3` (whose flags are
/// in memory, out of seccomp's reach) answers ENOSYS, so the C library falls back to `clone`.
pub fn user_namespace_rules(errno: u32) -> Vec<SeccompRule> {
    vec![
        flags_rule("unshare", 0, CLONE_NEWUSER, errno),
        flags_rule("clone", 0, CLONE_NEWUSER, errno),
        SeccompRule {
            syscall: "clone3",
            errno: ENOSYS,
            arg: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new `ContainerSpec` field stops this from compiling until it is destructured here, and
    /// the test fails until [`MECHANISMS`] (and so the generated docs) lists it.
    #[test]
    fn every_container_field_is_a_listed_mechanism() {
        let ContainerSpec {
            uid: _,
            gid: _,
            capabilities: _,
            ambient_capabilities: _,
            seccomp: _,
            bwrap: _,
            proc_masked: _,
            masked_paths: _,
        } = container_base();
        let fields = [
            "uid, gid",
            "capabilities",
            "ambient_capabilities",
            "seccomp",
            "bwrap",
            "proc_masked",
            "masked_paths",
        ];
        let listed: Vec<&str> = MECHANISMS.iter().map(|m| m.field).collect();
        assert_eq!(listed, fields);
    }
}
