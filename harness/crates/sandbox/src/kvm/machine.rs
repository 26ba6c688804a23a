//! One virtual machine per process and environment: booted on first use, shared by every cell
//! of that environment, gone with the process.
//!
//! Nothing outlives the harness: QEMU is started by a thread that lives as long as it does, with
//! the parent-death signal SIGKILL (a SIGKILLed harness takes its machines along);
//! [`shut_down_all`] ends them at a run's end or a signal; and the state folder holds the owner
//! record ([`crate::owner`]) and QEMU's pid, so `sandbox::reap` ends a machine whose harness is
//! gone all the same.

use super::{
    accelerator, guest_folder, Accel, USERNS_RESTRICTED_PROFILE, USERNS_RESTRICTED_PROFILE_TEXT,
};
use crate::owner;
use crate::spec::VmSpec;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A machine's state folder (in the temporary folder) starts with this.
pub const STATE_PREFIX: &str = "ccf-kvm-";
/// QEMU's pid, in the state folder.
pub const PID_FILE: &str = "qemu.pid";
/// The guest's console, in the state folder.
pub const CONSOLE_FILE: &str = "console.log";
/// Bound on a boot, kernel to the agent's first answer: measured about 1 s under KVM and 30 to
/// 55 s under QEMU's emulator on a loaded 2-core machine.
pub fn boot_timeout(accel: Accel) -> Duration {
    match accel {
        Accel::Kvm => Duration::from_secs(60),
        Accel::Tcg => Duration::from_secs(240),
    }
}
/// Bound on one readiness question to the agent.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
const GUEST_MEMORY_MIB: u32 = 1024;

/// A running machine.
#[derive(Debug)]
pub struct Machine {
    environment: String,
    state: PathBuf,
    port: u16,
    pid: u32,
    accel: Accel,
    booted_in: Duration,
    ended: Arc<Mutex<Option<String>>>,
}

impl Machine {
    /// The host loopback port QEMU forwards to the agent.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The file holding this boot's token (root's only).
    pub fn token_file(&self) -> PathBuf {
        self.state.join("token")
    }

    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn state_folder(&self) -> &Path {
        &self.state
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }

    /// From QEMU's start to the agent's first answer.
    pub fn booted_in(&self) -> Duration {
        self.booted_in
    }

    /// An error naming how the machine ended, if it has.
    pub fn check_running(&self) -> Result<()> {
        match &*self.ended.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(how) => bail!(
                "the virtual machine of `{}` has ended ({how}); its console: {}",
                self.environment,
                self.state.join(CONSOLE_FILE).display()
            ),
        }
    }
}

type Slot = Arc<OnceLock<Result<Arc<Machine>, String>>>;

fn machines() -> &'static Mutex<BTreeMap<String, Slot>> {
    static MACHINES: OnceLock<Mutex<BTreeMap<String, Slot>>> = OnceLock::new();
    MACHINES.get_or_init(Default::default)
}

/// A guest kernel that panicked while it booted: under QEMU's emulator the guest's kernel now and
/// then takes an oops patching its own text (measured once in a rehearsal: `int3` in
/// `sched_clock_cpu` at 3.7 s, multi-threaded TCG), the emulator's flake, not the environment's
/// answer, so the machine boots once more ([`BOOT_ATTEMPTS`]); both consoles are named if the
/// second boot fails too.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct GuestPanickedWhileBooting(String);

/// Boots of one machine before its environment's cells fail: a second only after a guest kernel
/// panic while booting.
const BOOT_ATTEMPTS: usize = 2;

/// The machine of `environment`, booted by the first caller; the others wait for that boot. A
/// boot that failed stays failed for this process: every cell says why, none boots again.
pub fn for_environment(environment: &str, vm: &VmSpec) -> Result<Arc<Machine>> {
    let slot = machines()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(environment.to_string())
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let mut failures = Vec::new();
        for _ in 0..BOOT_ATTEMPTS {
            match boot(environment, vm) {
                Ok(machine) => return Ok(Arc::new(machine)),
                Err(e) => {
                    let panicked = e.downcast_ref::<GuestPanickedWhileBooting>().is_some();
                    failures.push(format!("{e:#}"));
                    if !panicked {
                        break;
                    }
                    tracing::warn!(
                        environment,
                        "the guest kernel panicked while booting; booting once more"
                    );
                }
            }
        }
        Err(failures.join("\nthen, booted once more: "))
    })
    .clone()
    .map_err(|why| anyhow::anyhow!("booting the virtual machine of `{environment}`: {why}"))
}

/// Ends every machine this process booted and removes their state folders.
pub fn shut_down_all() {
    let mut listed = machines().lock().unwrap_or_else(|p| p.into_inner());
    shut_down(std::mem::take(&mut *listed));
}

/// [`shut_down_all`] when the process exits (`atexit`): a test binary or `harness env probe`
/// ends without a teardown, and its QEMU would die with it but leave its state folder. It never
/// waits for a lock another thread may hold at exit.
extern "C" fn shut_down_at_exit() {
    if let Ok(mut listed) = machines().try_lock() {
        shut_down(std::mem::take(&mut *listed));
    }
}

fn shut_down(listed: BTreeMap<String, Slot>) {
    for slot in listed.into_values() {
        if let Some(Ok(machine)) = slot.get() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(machine.pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = std::fs::remove_dir_all(&machine.state);
        }
    }
}

/// The lines of the boot's settings the guest's init reads (`init.sh`).
fn boot_env(vm: &VmSpec) -> String {
    let profiles: Vec<String> = vm
        .apparmor_profiles
        .iter()
        .map(|p| match *p {
            USERNS_RESTRICTED_PROFILE => "/run/harness/userns-restricted.apparmor".to_string(),
            path => path.to_string(),
        })
        .collect();
    let sysctls: Vec<String> = vm.sysctls.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "HARNESS_APPARMOR_PROFILES=\"{}\"\nHARNESS_SYSCTLS=\"{}\"\n",
        profiles.join(" "),
        sysctls.join(" ")
    )
}

fn random_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A free port on the host's loopback, for QEMU to forward (it is free again when this
/// returns; a race with another program shows as QEMU failing to start, which says so).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

fn write_private(path: &Path, text: &str, mode: u32) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn boot(environment: &str, vm: &VmSpec) -> Result<Machine> {
    static AT_EXIT: OnceLock<()> = OnceLock::new();
    AT_EXIT.get_or_init(|| {
        // SAFETY: registers a plain function that runs once, at exit.
        unsafe { libc::atexit(shut_down_at_exit) };
    });
    let accel = accelerator().map_err(anyhow::Error::msg)?;
    let guest = guest_folder();
    let state = tempfile::Builder::new()
        .prefix(&format!("{STATE_PREFIX}{environment}-"))
        .tempdir()
        .context("creating a machine's state folder")?
        .keep();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700))?;
    owner::record(&state, environment)?;
    write_private(&state.join("init.sh"), include_str!("init.sh"), 0o600)?;
    write_private(&state.join("agent.py"), include_str!("agent.py"), 0o600)?;
    write_private(
        &state.join("userns-restricted.apparmor"),
        USERNS_RESTRICTED_PROFILE_TEXT,
        0o600,
    )?;
    write_private(&state.join("token"), &random_token()?, 0o600)?;
    write_private(&state.join("boot.env"), &boot_env(vm), 0o600)?;
    let port = free_port()?;
    let mut command = std::process::Command::new("qemu-system-x86_64");
    command.args(qemu_args(&guest, &state, port, accel));
    let log = std::fs::File::create(state.join("qemu.log"))?;
    command
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let started = Instant::now();
    let ended = Arc::new(Mutex::new(None));
    let pid = spawn_kept(command, ended.clone())?;
    let machine = Machine {
        environment: environment.to_string(),
        state,
        port,
        pid,
        accel,
        booted_in: Duration::ZERO,
        ended,
    };
    let deadline = started + boot_timeout(accel);
    loop {
        if let Err(err) = machine.check_running() {
            let console =
                std::fs::read_to_string(machine.state.join(CONSOLE_FILE)).unwrap_or_default();
            let qemu = std::fs::read_to_string(machine.state.join("qemu.log")).unwrap_or_default();
            let message = format!(
                "{err:#}\nQEMU: {}\nconsole (end): {}",
                qemu.trim(),
                tail(&console, 1500)
            );
            if console.contains("Kernel panic") {
                return Err(GuestPanickedWhileBooting(message).into());
            }
            bail!("{message}");
        }
        if ping(port, &std::fs::read_to_string(machine.token_file())?).is_ok() {
            break;
        }
        if Instant::now() >= deadline {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            bail!(
                "the guest's agent did not answer within {}s ({}); its console: {}",
                boot_timeout(accel).as_secs(),
                accel.as_str(),
                machine.state.join(CONSOLE_FILE).display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let booted_in = started.elapsed();
    // Said to the user: a boot is the one cost of its environment that is seconds, once per
    // process (a run), and a second boot of one environment would be a bug.
    tracing::info!(target: "notice",
        "harness: the virtual machine of `{environment}` booted in {:.1} s ({}); every cell \
         there in this process shares it",
        booted_in.as_secs_f64(),
        accel.as_str()
    );
    Ok(Machine {
        booted_in,
        ..machine
    })
}

fn tail(text: &str, bytes: usize) -> &str {
    let mut start = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn qemu_args(guest: &Path, state: &Path, port: u16, accel: Accel) -> Vec<String> {
    let g = |name: &str| guest.join(name).display().to_string();
    let s = |name: &str| state.join(name).display().to_string();
    let (machine, cpu) = match accel {
        Accel::Kvm => ("q35,accel=kvm", "host"),
        Accel::Tcg => ("q35", "max"),
    };
    let mut args: Vec<String> = vec![
        "-name".into(),
        format!("harness-kvm,process=harness-kvm-{port}"),
        "-machine".into(),
        machine.into(),
        "-cpu".into(),
        cpu.into(),
        "-smp".into(),
        "2".into(),
        "-m".into(),
        GUEST_MEMORY_MIB.to_string(),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-kernel".into(),
        g("vmlinuz"),
        "-initrd".into(),
        g("initrd.img"),
        "-append".into(),
        "root=/dev/vda rw console=ttyS0 init=/sbin/harness-init panic=-1 quiet".into(),
        "-drive".into(),
        format!("file={},format=raw,if=virtio,snapshot=on", g("rootfs.ext4")),
        "-virtfs".into(),
        format!(
            "local,path={},mount_tag=harness,security_model=none,readonly=on",
            state.display()
        ),
        "-virtfs".into(),
        "local,path=/,mount_tag=host,security_model=passthrough".into(),
        "-netdev".into(),
        format!("user,id=net0,hostfwd=tcp:127.0.0.1:{port}-10.0.2.15:7000"),
        "-device".into(),
        "virtio-net-pci,netdev=net0".into(),
        "-serial".into(),
        format!("file:{}", s(CONSOLE_FILE)),
        "-pidfile".into(),
        s(PID_FILE),
    ];
    if accel == Accel::Tcg {
        args.extend(["-accel".into(), "tcg,thread=multi".into()]);
    }
    args
}

/// Starts QEMU from a thread that waits for it: the parent-death signal is the spawning
/// thread's, so that thread must live as long as QEMU. `ended` says how it ended.
fn spawn_kept(
    mut command: std::process::Command,
    ended: Arc<Mutex<Option<String>>>,
) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let (sender, receiver) = std::sync::mpsc::channel();
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    std::thread::Builder::new()
        .name("kvm-machine".into())
        .spawn(move || match command.spawn() {
            Ok(mut child) => {
                let _ = sender.send(Ok(child.id()));
                let how = match child.wait() {
                    Ok(status) => format!("QEMU {status}"),
                    Err(err) => format!("waiting for QEMU: {err}"),
                };
                *ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(how);
            }
            Err(err) => {
                let _ = sender.send(Err(err));
            }
        })?;
    let pid = receiver
        .recv_timeout(Duration::from_secs(10))
        .context("QEMU's start did not report within 10s")?
        .context("starting qemu-system-x86_64")?;
    Ok(pid)
}

/// One readiness question: the agent answers a `ping` with exit status 0.
fn ping(port: u16, token: &str) -> Result<()> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, PING_TIMEOUT)?;
    stream.set_read_timeout(Some(PING_TIMEOUT))?;
    stream.set_write_timeout(Some(PING_TIMEOUT))?;
    let request = serde_json::json!({"op": "ping", "token": token.trim()});
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut frame = [0u8; 6];
    stream.read_exact(&mut frame)?;
    if &frame == b"X\0\0\0\x010" {
        Ok(())
    } else {
        bail!("the agent answered {frame:?}")
    }
}
