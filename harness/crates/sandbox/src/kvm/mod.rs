//! The `kvm` runtime: an environment on a real Debian kernel, in a virtual machine booted once
//! per process and environment ([`machine`]); each process of a cell is one TCP connection to the
//! guest's agent (`agent.py`), relayed by a small host program (`relay.py`) that the launcher
//! starts in its place, so a cell pays a connection and a mount namespace, not a boot.
//!
//! The guest is the image `ci/kvm-guest-image` builds (Debian 13: kernel 6.12, AppArmor 4.1,
//! bubblewrap 0.12, the `bwrap-userns-restrict` profile). The host's root is shared with 9p; a
//! process sees only the folders of its mounts, at their own paths, over the guest's own root
//! (so `/usr/bin/bwrap` is Debian 13's), runs as the spec's uid and gid, and under its AppArmor
//! profile. Loopback ports named in its arguments or environment reach the host's (the mock
//! model API).

pub mod machine;

use crate::launcher::{EnvMounts, Launcher, PreparedCommand, ProcessSpec};
use crate::spec::{EnvSpec, VmSpec};
use crate::system::which;
use anyhow::{Context, Result};
use machine::Machine;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The guest image's folder: `$HARNESS_KVM_GUEST`, else [`DEFAULT_GUEST`].
pub const GUEST_VAR: &str = "HARNESS_KVM_GUEST";
pub const DEFAULT_GUEST: &str = "/var/cache/harness/kvm-guest";
/// The image version this harness boots (`VERSION` in the folder; `ci/kvm-guest-image` writes it).
pub const GUEST_VERSION: &str = "1";
/// Forces the accelerator: `kvm` or `tcg` (QEMU's emulator, no `/dev/kvm` needed, slow).
pub const ACCEL_VAR: &str = "HARNESS_KVM_ACCEL";

/// The profile of [`USERNS_RESTRICTED_PROFILE_TEXT`], by name.
pub const USERNS_RESTRICTED_PROFILE: &str = "harness-userns-restricted";
/// What Ubuntu's `kernel.apparmor_restrict_unprivileged_userns=1` does, as a profile (Debian's
/// kernel has the user-namespace mediation but not that sysctl); loaded when a spec names
/// [`USERNS_RESTRICTED_PROFILE`].
pub const USERNS_RESTRICTED_PROFILE_TEXT: &str = include_str!("userns-restricted.apparmor");
/// Debian 13's `bwrap-userns-restrict` (apparmor-profiles): `/usr/bin/bwrap` may create user
/// namespaces and hold capabilities in them; nothing else under the restriction may.
pub const BWRAP_USERNS_RESTRICT: &str = "/usr/share/apparmor/extra-profiles/bwrap-userns-restrict";

const RELAY: &str = include_str!("relay.py");
/// A program or folder below these is the guest's own (Debian 13's), never the host's.
const GUEST_SYSTEM: &[&str] = &["/bin", "/sbin", "/usr", "/lib", "/lib64", "/etc"];

/// How QEMU runs the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    /// QEMU's emulator: where `/dev/kvm` is a paravirtual KVM (`kvm_pvm`, as in a Firecracker
    /// machine) that runs only kernels built for it, not Debian's.
    Tcg,
}

impl Accel {
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The guest image's folder.
pub fn guest_folder() -> PathBuf {
    std::env::var_os(GUEST_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_GUEST))
}

/// The accelerator here: `$HARNESS_KVM_ACCEL`, else KVM, or QEMU's emulator where the host's KVM
/// is paravirtual (it cannot boot Debian's kernel: measured, an emulation failure in its
/// decompressor). An error when there is no usable `/dev/kvm` and nothing forces `tcg`.
pub fn accelerator() -> Result<Accel, String> {
    match std::env::var(ACCEL_VAR).unwrap_or_default().as_str() {
        "tcg" => return Ok(Accel::Tcg),
        "kvm" | "" => {}
        other => {
            return Err(format!(
                "{ACCEL_VAR}={other} is not an accelerator (kvm or tcg)"
            ))
        }
    }
    let usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm");
    if let Err(err) = usable {
        return Err(format!(
            "no usable /dev/kvm ({err}): the kvm runtime needs KVM"
        ));
    }
    if std::env::var(ACCEL_VAR).as_deref() != Ok("kvm") && Path::new("/sys/module/kvm_pvm").exists()
    {
        return Ok(Accel::Tcg);
    }
    Ok(Accel::Kvm)
}

/// Why the kvm runtime cannot run here, if it cannot.
pub fn prerequisites() -> Result<(), String> {
    let mut missing = Vec::new();
    if let Err(why) = accelerator() {
        missing.push(why);
    }
    if !nix::unistd::geteuid().is_root() {
        missing.push("not root (the host share keeps file owners only for root)".into());
    }
    if which("qemu-system-x86_64").is_none() {
        missing
            .push("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into());
    }
    if which("python3").is_none() {
        missing.push("python3 is not installed (the relay of each process)".into());
    }
    let guest = guest_folder();
    let version = std::fs::read_to_string(guest.join("VERSION")).unwrap_or_default();
    if version.trim() != GUEST_VERSION {
        missing.push(format!(
            "no guest image version {GUEST_VERSION} in {} (build it as root: ci/kvm-guest-image)",
            guest.display()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// Runs each process in the environment's virtual machine.
pub struct KvmLauncher {
    name: &'static str,
    vm: VmSpec,
    mounts: EnvMounts,
    machine: Arc<Machine>,
}

impl KvmLauncher {
    /// The environment's machine, booted now if this process has not booted it yet.
    pub fn new(spec: EnvSpec, mounts: EnvMounts) -> Result<KvmLauncher> {
        let vm = spec
            .vm
            .clone()
            .with_context(|| format!("environment `{}` is not a virtual machine", spec.name))?;
        let machine = machine::for_environment(spec.name, &vm)?;
        Ok(KvmLauncher {
            name: spec.name,
            vm,
            mounts,
            machine,
        })
    }

    /// What the agent is asked to run (without the token, which the relay adds).
    fn request(&self, process: &ProcessSpec) -> serde_json::Value {
        let mut binds: Vec<(PathBuf, bool)> = Vec::new();
        binds.push((self.mounts.scratch.clone(), true));
        binds.extend(self.mounts.writable.iter().map(|p| (p.clone(), true)));
        binds.extend(self.mounts.readonly.iter().map(|p| (p.clone(), false)));
        binds.extend(
            self.mounts
                .bundled_bwraps
                .iter()
                .map(|p| (p.clone(), false)),
        );
        for needed in [&process.program, &process.cwd] {
            let guests_own = GUEST_SYSTEM.iter().any(|system| needed.starts_with(system));
            if !guests_own && !binds.iter().any(|(path, _)| needed.starts_with(path)) {
                binds.push((needed.clone(), false));
            }
        }
        let binds: Vec<serde_json::Value> = binds
            .into_iter()
            .filter(|(path, _)| path.is_absolute())
            .map(|(path, writable)| serde_json::json!({"path": path, "writable": writable}))
            .collect();
        let words = process
            .args
            .iter()
            .map(String::as_str)
            .chain(process.env.iter().map(|(_, value)| value.as_str()));
        serde_json::json!({
            "op": "exec",
            "program": process.program,
            "args": process.args,
            "env": process.env,
            "cwd": process.cwd,
            "uid": self.vm.uid,
            "gid": self.vm.gid,
            "binds": binds,
            "forward_tcp": loopback_ports(words),
            "apparmor_profile": self.vm.confined_by,
        })
    }
}

/// The ports of `127.0.0.1:PORT` and `localhost:PORT` in `words`, each once.
pub fn loopback_ports<'a>(words: impl Iterator<Item = &'a str>) -> Vec<u16> {
    let mut ports = Vec::new();
    for word in words {
        for host in ["127.0.0.1:", "localhost:"] {
            for (at, _) in word.match_indices(host) {
                let digits: String = word[at + host.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if let Ok(port) = digits.parse::<u16>() {
                    if port != 0 && !ports.contains(&port) {
                        ports.push(port);
                    }
                }
            }
        }
    }
    ports
}

impl Launcher for KvmLauncher {
    fn environment(&self) -> &str {
        self.name
    }

    fn prepare(&self, process: &ProcessSpec) -> Result<PreparedCommand> {
        self.machine.check_running()?;
        if self.vm.uid != 0 {
            let writable = std::iter::once(&self.mounts.scratch).chain(&self.mounts.writable);
            for folder in writable.filter(|folder| folder.exists()) {
                crate::launcher::hand_over(folder, self.vm.uid, self.vm.gid)?;
            }
        }
        let mut command = tokio::process::Command::new("python3");
        command
            .arg("-I")
            .arg("-c")
            .arg(RELAY)
            .arg(self.machine.port().to_string())
            .arg(self.machine.token_file())
            .env_clear()
            .env("HARNESS_KVM_EXEC", self.request(process).to_string())
            .kill_on_drop(true);
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        Ok(PreparedCommand {
            command,
            guard: Box::new(()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mock_apis_port_is_forwarded_once() {
        let words = [
            "model_providers.mock={base_url=\"http://127.0.0.1:4242/v1\"}",
            "http://localhost:4242/x",
            "127.0.0.1:0",
            "no port 127.0.0.1:",
            "http://localhost:8080",
        ];
        assert_eq!(loopback_ports(words.into_iter()), vec![4242, 8080]);
    }
}
