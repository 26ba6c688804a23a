//! Rendering a [`ContainerSpec`] into an OCI runtime config (`config.json`) with `oci-spec`.

use crate::spec::{ArgOp, ContainerSpec, SeccompRule, MASKED_PATHS, READONLY_PATHS};
use anyhow::{Context, Result};
use oci_spec::runtime::{
    Arch, Capabilities, Linux, LinuxBuilder, LinuxCapabilitiesBuilder, LinuxNamespaceBuilder,
    LinuxNamespaceType, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder,
    LinuxSeccompBuilder, LinuxSeccompOperator, LinuxSyscallBuilder, Mount, MountBuilder, Process,
    ProcessBuilder, RootBuilder, Spec, UserBuilder,
};
use std::path::{Path, PathBuf};

/// Everything about one container process that is not part of the environment's spec.
#[derive(Debug, Clone, Default)]
pub struct ContainerInputs {
    /// The (empty) folder the host root is bind-mounted on, read-only.
    pub rootfs: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Host folders bound read-write at the same path.
    pub writable: Vec<PathBuf>,
    /// Host folders bound read-only at the same path (over a tmpfs mask, see `masks`).
    pub readonly: Vec<PathBuf>,
    /// Folders hidden behind an empty folder (mode 0755, `mask-N` next to the rootfs, created by
    /// the caller), so that binds below them become reachable for a non-root uid when the host
    /// folder itself is not (e.g. a 0700 `$HOME`).
    pub masks: Vec<PathBuf>,
    /// `(source, destination)`: single files bound read-only over a path (the execute-only
    /// bubblewrap copies).
    pub file_overlays: Vec<(PathBuf, PathBuf)>,
}

/// The seccomp filter of a spec: default allow, plus the spec's rules. `None` when the spec has
/// no rules (then no filter is installed at all, like the `container` control).
pub fn seccomp(rules: &[SeccompRule]) -> Result<Option<LinuxSeccomp>> {
    if rules.is_empty() {
        return Ok(None);
    }
    let syscalls = rules
        .iter()
        .map(|rule| {
            let mut builder = LinuxSyscallBuilder::default()
                .names(vec![rule.syscall.to_string()])
                .action(LinuxSeccompAction::ScmpActErrno)
                .errno_ret(rule.errno);
            if let Some(arg) = rule.arg {
                let arg = match arg.op {
                    ArgOp::Equals(value) => LinuxSeccompArgBuilder::default()
                        .index(arg.index)
                        .value(value)
                        .op(LinuxSeccompOperator::ScmpCmpEq)
                        .build()?,
                    ArgOp::MaskedEquals { mask, value } => LinuxSeccompArgBuilder::default()
                        .index(arg.index)
                        .value(mask)
                        .value_two(value)
                        .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
                        .build()?,
                };
                builder = builder.args(vec![arg]);
            }
            builder.build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(
        LinuxSeccompBuilder::default()
            .default_action(LinuxSeccompAction::ScmpActAllow)
            .architectures(vec![native_arch()?])
            .syscalls(syscalls)
            .build()?,
    ))
}

fn native_arch() -> Result<Arch> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(Arch::ScmpArchX86_64),
        "aarch64" => Ok(Arch::ScmpArchAarch64),
        other => anyhow::bail!("no seccomp architecture is known for {other}"),
    }
}

fn bind(source: &Path, destination: &Path, writable: bool) -> Result<Mount> {
    let mode = if writable { "rw" } else { "ro" };
    Ok(MountBuilder::default()
        .destination(destination)
        .typ("bind")
        .source(source)
        .options(vec!["rbind".to_string(), mode.to_string()])
        .build()?)
}

fn mount(destination: &str, typ: &str, source: &str, options: &[&str]) -> Result<Mount> {
    Ok(MountBuilder::default()
        .destination(destination)
        .typ(typ)
        .source(source)
        .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
        .build()?)
}

/// The OCI config for one process of an environment.
pub fn render(spec: &ContainerSpec, inputs: &ContainerInputs) -> Result<Spec> {
    let process = process(spec, inputs)?;
    let mounts = mounts(inputs)?;
    let linux = linux(spec)?;
    let mut config = Spec::default();
    config
        .set_hostname(Some("conformance".to_string()))
        .set_root(Some(
            RootBuilder::default()
                .path(&inputs.rootfs)
                .readonly(true)
                .build()?,
        ))
        .set_process(Some(process))
        .set_mounts(Some(mounts))
        .set_linux(Some(linux))
        .set_annotations(None);
    Ok(config)
}

/// The process: who it runs as, what with, its capabilities.
fn process(spec: &ContainerSpec, inputs: &ContainerInputs) -> Result<Process> {
    let capabilities: Capabilities = spec.capabilities.iter().copied().collect();
    // Ambient capabilities must also be permitted and inheritable.
    let carried = if spec.ambient_capabilities {
        capabilities.clone()
    } else {
        Capabilities::new()
    };
    let process = ProcessBuilder::default()
        // `terminal: false`: runc hands our stdin/stdout/stderr straight to the process, which is
        // how the JSON-RPC peer outside talks to the app-server inside.
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(spec.uid)
                .gid(spec.gid)
                .additional_gids(Vec::<u32>::new())
                .build()?,
        )
        .args(inputs.args.clone())
        .env(
            inputs
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        )
        .cwd(&inputs.cwd)
        .capabilities(
            LinuxCapabilitiesBuilder::default()
                .bounding(capabilities.clone())
                .effective(capabilities.clone())
                .permitted(capabilities)
                .inheritable(carried.clone())
                .ambient(carried)
                .build()?,
        )
        .no_new_privileges(true)
        .build()?;
    Ok(process)
}

/// The runtime's own mounts, then the binds of the host's folders and files.
fn mounts(inputs: &ContainerInputs) -> Result<Vec<Mount>> {
    // The usual runtime mounts; /proc, /dev and /sys are the container's own.
    let mut mounts = vec![
        mount("/proc", "proc", "proc", &[])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        )?,
        // Writable /tmp like a container image has; the folders the process must write to are
        // bound explicitly below.
        mount("/tmp", "tmpfs", "tmpfs", &["nosuid", "nodev", "mode=1777"])?,
    ];
    let mut binds: Vec<(PathBuf, &Path, bool)> = Vec::new();
    for (index, mask) in inputs.masks.iter().enumerate() {
        // An empty folder of the bundle, not a tmpfs: runc gives a tmpfs the mode of the folder
        // it covers, which would keep a 0700 home unsearchable.
        let empty = inputs
            .rootfs
            .parent()
            .context("the rootfs has no bundle folder")?
            .join(format!("mask-{index}"));
        binds.push((empty, mask, true));
    }
    for folder in &inputs.readonly {
        binds.push((folder.clone(), folder, false));
    }
    for folder in &inputs.writable {
        binds.push((folder.clone(), folder, true));
    }
    // runc mounts in order: a folder before what is bound below it (a read-only file inside a
    // writable folder, a folder inside a mask), whichever list named it; stable, so a mask comes
    // before binds of the same depth and read-only before writable.
    binds.sort_by_key(|(_, destination, _)| destination.components().count());
    for (source, destination, writable) in binds {
        mounts.push(bind(&source, destination, writable)?);
    }
    for (source, destination) in &inputs.file_overlays {
        mounts.push(bind(source, destination, false)?);
    }
    Ok(mounts)
}

/// The namespaces, the masked and read-only paths, the seccomp filter.
fn linux(spec: &ContainerSpec) -> Result<Linux> {
    let namespaces = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ]
    // No network namespace: the host network, so loopback reaches the harness.
    .into_iter()
    .map(|typ| LinuxNamespaceBuilder::default().typ(typ).build())
    .collect::<Result<Vec<_>, _>>()?;

    let (masked, readonly): (&[&str], &[&str]) = if spec.proc_masked {
        (MASKED_PATHS, READONLY_PATHS)
    } else {
        (&[], &[])
    };
    let to_strings = |paths: &[&str]| paths.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let mut masked = to_strings(masked);
    masked.extend(to_strings(&spec.masked_paths));
    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .masked_paths(masked)
        .readonly_paths(to_strings(readonly));
    if let Some(filter) = seccomp(&spec.seccomp)? {
        linux = linux.seccomp(filter);
    }
    Ok(linux.build()?)
}

/// `config` as JSON with the capability sets sorted, so the same inputs give the same bytes
/// (oci-spec keeps them in hash sets).
pub fn to_json(config: &Spec) -> Result<String> {
    let mut value = serde_json::to_value(config).context("serializing the OCI config")?;
    if let Some(sets) = value
        .pointer_mut("/process/capabilities")
        .and_then(|v| v.as_object_mut())
    {
        for set in sets.values_mut() {
            if let Some(list) = set.as_array_mut() {
                list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
    }
    Ok(serde_json::to_string_pretty(&value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_of(name: &str) -> serde_json::Value {
        let env = crate::catalogue::spec(name).unwrap();
        let inputs = ContainerInputs {
            rootfs: "/bundle/rootfs".into(),
            args: vec!["true".into()],
            cwd: "/".into(),
            ..Default::default()
        };
        let json = to_json(&render(env.container.as_ref().unwrap(), &inputs).unwrap()).unwrap();
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn daytona_seccomp_refuses_netlink_sendto_only() {
        let config = config_of("daytona");
        assert_eq!(
            config["linux"]["seccomp"]["syscalls"],
            serde_json::json!([{"names": ["sendto"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                "args": [{"index": 5, "value": 12, "op": "SCMP_CMP_EQ"}]}])
        );
        assert_eq!(
            config["linux"]["seccomp"]["defaultAction"],
            "SCMP_ACT_ALLOW"
        );
    }

    #[test]
    fn userns_blocked_matches_dockers_clone_newuser_rule() {
        let syscalls = &config_of("userns-blocked")["linux"]["seccomp"]["syscalls"];
        assert_eq!(syscalls[0]["names"][0], "unshare");
        assert_eq!(syscalls[0]["args"][0]["value"], 268435456u64);
        assert_eq!(syscalls[0]["args"][0]["valueTwo"], 268435456u64);
        assert_eq!(syscalls[0]["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(
            syscalls[2],
            serde_json::json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38})
        );
    }

    #[test]
    fn container_has_host_network_no_net_admin_and_no_filter() {
        let config = config_of("container");
        let namespaces: Vec<&str> = config["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert!(!namespaces.contains(&"network"), "{namespaces:?}");
        let caps = config["process"]["capabilities"]["bounding"].to_string();
        assert!(
            !caps.contains("CAP_NET_ADMIN") && !caps.contains("CAP_SYS_ADMIN"),
            "{caps}"
        );
        assert!(caps.contains("CAP_NET_RAW"), "{caps}");
        assert!(config["linux"].get("seccomp").is_none());
        assert_eq!(config["process"]["terminal"], false);
        assert_eq!(config["root"]["readonly"], true);
        assert_eq!(config["linux"]["maskedPaths"], serde_json::json!([]));
    }

    #[test]
    fn uidmap_runs_as_1000_without_capabilities() {
        let config = config_of("daytona-uidmap");
        assert_eq!(config["process"]["user"]["uid"], 1000);
        assert_eq!(config["process"]["user"]["gid"], 1000);
        assert_eq!(
            config["process"]["capabilities"]["effective"],
            serde_json::json!([])
        );
    }

    #[test]
    fn new_environments_render_their_mechanism() {
        let lsm = &config_of("lsm-mount-denied")["linux"]["seccomp"]["syscalls"][0];
        assert_eq!(lsm["names"][0], "mount");
        assert_eq!(lsm["errnoRet"], 13);
        assert_eq!(lsm["args"][0]["index"], 3);
        assert_eq!(lsm["args"][0]["value"], 0x84000u64);
        let masked = config_of("proc-masked");
        assert!(masked["linux"]["maskedPaths"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("/proc/kcore")));
        assert!(masked["linux"]["readonlyPaths"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("/proc/sys")));
        assert_eq!(
            config_of("userns-limit")["linux"]["seccomp"]["syscalls"][0]["errnoRet"],
            28
        );
        assert_eq!(
            config_of("no-userns-kernel")["linux"]["seccomp"]["syscalls"][1]["errnoRet"],
            22
        );
        let ambient = &config_of("ambient-caps")["process"];
        assert_eq!(ambient["user"]["uid"], 1000);
        assert_eq!(
            ambient["capabilities"]["ambient"],
            ambient["capabilities"]["permitted"]
        );
        assert!(ambient["capabilities"]["ambient"]
            .to_string()
            .contains("CAP_SETUID"));
        let hardened = &config_of("hardened")["process"];
        assert_eq!(hardened["user"]["uid"], 1000);
        assert_eq!(hardened["noNewPrivileges"], true);
        assert_eq!(hardened["capabilities"]["bounding"], serde_json::json!([]));
    }

    #[test]
    fn issue_39_environments_render_their_mechanism() {
        let devpts = &config_of("devpts-denied")["linux"]["seccomp"]["syscalls"][0];
        assert_eq!(
            devpts,
            &serde_json::json!({"names": ["mount"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13,
                "args": [{"index": 3, "value": 10, "op": "SCMP_CMP_EQ"}]})
        );
        let masked = config_of("proc-sys-kernel-masked");
        assert_eq!(
            masked["linux"]["maskedPaths"],
            serde_json::json!(["/proc/sys/kernel"])
        );
        assert_eq!(masked["linux"]["readonlyPaths"], serde_json::json!([]));
        assert!(masked["linux"].get("seccomp").is_none());
        let pivot = &config_of("initramfs-root")["linux"]["seccomp"]["syscalls"][0];
        assert_eq!(
            pivot,
            &serde_json::json!({"names": ["pivot_root"], "action": "SCMP_ACT_ERRNO", "errnoRet": 22})
        );
    }
}
