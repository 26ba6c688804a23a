//! The restricted environments as data: one [`EnvSpec`] per environment. Runtimes (runc, Docker)
//! render these specs; nothing about an environment is decided anywhere else.

use oci_spec::runtime::Capability;

/// CLONE_NEWUSER from `<linux/sched.h>`.
pub const CLONE_NEWUSER: u64 = 0x1000_0000;
/// errno values the seccomp rules answer with.
pub const EPERM: u32 = 1;
pub const ENOSYS: u32 = 38;
/// `sizeof(struct sockaddr_nl)`: the address length of bubblewrap's RTM_NEWADDR `sendto`.
pub const SOCKADDR_NL_LEN: u64 = 12;

/// The canary every probe runs: what Codex's own start-up probe runs (always `--unshare-user`).
pub const CANARY: [&str; 7] = [
    "bwrap",
    "--unshare-user",
    "--unshare-net",
    "--ro-bind",
    "/",
    "/",
    "true",
];

/// One restricted environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSpec {
    pub name: &'static str,
    /// What it restricts, in one line.
    pub restricts: &'static str,
    /// The real platform it stands for.
    pub stands_for: &'static str,
    /// `None`: the host as it is; `Some`: an OCI container.
    pub container: Option<ContainerSpec>,
    /// What the canary must do here.
    pub expected_probe: ExpectedProbe,
}

/// How a container restricts its process. Rendered to an OCI config (runc) or to Docker options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// uid and gid of the process; `(0, 0)` is root.
    pub uid: u32,
    pub gid: u32,
    /// Capabilities in every set (bounding, effective, permitted); nothing is ambient or
    /// inheritable.
    pub capabilities: Vec<Capability>,
    /// Seccomp rules on top of a default-allow filter (empty: no filter at all).
    pub seccomp: Vec<SeccompRule>,
    /// Bind an execute-only (0711) copy of bubblewrap over every bubblewrap Codex may use, so
    /// that executing it as a non-root uid makes the process non-dumpable.
    pub execute_only_bwrap: bool,
}

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
    const SUCCEEDS: ExpectedProbe = ExpectedProbe {
        exit_code: 0,
        stderr_signature: None,
    };

    fn fails_with(signature: &'static str) -> ExpectedProbe {
        ExpectedProbe {
            exit_code: 1,
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

pub const RTM_NEWADDR_SIGNATURE: &str =
    "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";
pub const UID_MAP_SIGNATURE: &str = "bwrap: setting up uid map: Permission denied";
pub const USERNS_SIGNATURE: &str = "bwrap: No permissions to create new namespace";

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

fn container_base() -> ContainerSpec {
    ContainerSpec {
        uid: 0,
        gid: 0,
        capabilities: docker_default_capabilities(),
        seccomp: Vec::new(),
        execute_only_bwrap: false,
    }
}

fn user_namespace_rule(syscall: &'static str) -> SeccompRule {
    SeccompRule {
        syscall,
        errno: EPERM,
        arg: Some(ArgMatch {
            index: 0,
            op: ArgOp::MaskedEquals {
                mask: CLONE_NEWUSER,
                value: CLONE_NEWUSER,
            },
        }),
    }
}

/// Every environment, in listing order.
pub fn all() -> Vec<EnvSpec> {
    vec![
        EnvSpec {
            name: "local",
            restricts: "nothing (the host as it is)",
            stands_for: "a developer machine or SSH host",
            container: None,
            expected_probe: ExpectedProbe::SUCCEEDS,
        },
        EnvSpec {
            name: "container",
            restricts:
                "read-only host root, Docker's default capabilities (no NET_ADMIN, no SYS_ADMIN)",
            stands_for: "a plain Docker container (the control: Codex works)",
            container: Some(container_base()),
            expected_probe: ExpectedProbe::SUCCEEDS,
        },
        EnvSpec {
            name: "daytona",
            restricts:
                "as container + seccomp: sendto(addrlen=12) -> EPERM (netlink RTM_NEWADDR refused)",
            stands_for: "the Daytona sandbox where loopback set-up is refused",
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
        },
        EnvSpec {
            name: "daytona-uidmap",
            restricts:
                "as container + uid/gid 1000, no capabilities, execute-only (non-dumpable) bwrap",
            stands_for: "the newer Daytona image where bubblewrap cannot write its uid map",
            container: Some(ContainerSpec {
                uid: 1000,
                gid: 1000,
                capabilities: Vec::new(),
                execute_only_bwrap: true,
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(UID_MAP_SIGNATURE),
        },
        EnvSpec {
            name: "userns-blocked",
            restricts:
                "as container + seccomp: CLONE_NEWUSER on unshare/clone -> EPERM, clone3 -> ENOSYS",
            stands_for: "Docker's default seccomp profile (user namespaces refused)",
            container: Some(ContainerSpec {
                seccomp: vec![
                    user_namespace_rule("unshare"),
                    user_namespace_rule("clone"),
                    // ENOSYS makes the C library fall back to clone(), where the rule above applies.
                    SeccompRule {
                        syscall: "clone3",
                        errno: ENOSYS,
                        arg: None,
                    },
                ],
                ..container_base()
            }),
            expected_probe: ExpectedProbe::fails_with(USERNS_SIGNATURE),
        },
    ]
}
