//! Running an environment on a Docker engine through testcontainers, from the same
//! [`ContainerSpec`] as runc: capabilities dropped, the seccomp profile (the OCI seccomp object
//! is also Docker's profile format), the user, the execute-only bubblewrap.
//!
//! One long-lived container per launcher (created by testcontainers, removed when the launcher
//! is dropped); each process is a `docker exec -i` in it, so the app-server's stdin/stdout reach
//! the driver and its stderr is kept.

use crate::launcher::{EnvMounts, Launcher, PreparedCommand, ProcessSpec};
use crate::oci;
use crate::overlays::{bwrap_overlays, bwrap_targets, passwd_overlay, SystemBwrap};
use crate::spec::{ContainerSpec, EnvSpec, MASKED_PATHS};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use testcontainers::core::{AccessMode, Mount};
use testcontainers::runners::{AsyncBuilder, AsyncRunner};
use testcontainers::{GenericBuildableImage, ImageExt};

/// The host folders bound read-only into every container: the userland the empty image lacks.
const HOST_USERLAND: &[&str] = &["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/opt"];

/// Other paths of `path` in the container: through each [`HOST_USERLAND`] folder that is a
/// symbolic link on the host (`/bin` -> `usr/bin` makes `/usr/bin/bwrap` also `/bin/bwrap`).
fn userland_aliases(path: &Path) -> Vec<PathBuf> {
    HOST_USERLAND
        .iter()
        .map(Path::new)
        .filter(|folder| folder.is_symlink())
        .filter_map(|folder| {
            let target = std::fs::canonicalize(folder).ok()?;
            let rest = path.strip_prefix(&target).ok()?;
            Some(folder.join(rest))
        })
        .collect()
}

/// The label that holds a container's owner record.
pub const OWNER_LABEL: &str = "ccf-harness.owner";
/// The label that names the host folder of a container's overlay files.
pub const OVERLAYS_LABEL: &str = "ccf-harness.overlays";
/// How that folder's name starts; a labelled path named otherwise is never removed.
pub const OVERLAYS_PREFIX: &str = "ccf-docker-overlays-";

/// The label value for a container this process starts for `environment`.
pub fn owner_label(environment: &str) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&crate::owner::Owner::current(
        &format!("docker:{environment}"),
    )?)?)
}

/// The image definition shipped in `ci/docker/Dockerfile` (empty: built offline).
pub const DOCKERFILE: &str = include_str!("../../../../ci/docker/Dockerfile");
const IMAGE_NAME: &str = "codex-conformance-env";
const IMAGE_TAG: &str = "latest";
/// Bound on building the image and starting the container.
const START_TIMEOUT: Duration = Duration::from_secs(600);
/// Bound on removing the container.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Is a Docker engine reachable? (`DOCKER_HOST`, else the default socket.)
pub fn engine_reachable() -> Result<(), String> {
    if let Some(host) = std::env::var_os("DOCKER_HOST").filter(|v| !v.is_empty()) {
        let host = host.to_string_lossy().into_owned();
        return match host.strip_prefix("unix://") {
            Some(socket) => connect(Path::new(socket)),
            // A TCP engine is taken as reachable; starting a container will tell otherwise.
            None => Ok(()),
        };
    }
    connect(Path::new("/var/run/docker.sock"))
}

fn connect(socket: &Path) -> Result<(), String> {
    std::os::unix::net::UnixStream::connect(socket)
        .map(|_| ())
        .map_err(|err| format!("no Docker engine at {}: {err}", socket.display()))
}

/// A launcher whose processes run in one Docker container.
pub struct DockerLauncher {
    env: EnvSpec,
    container_id: String,
    user: String,
    uid: u32,
    /// Where the container's binds land: all the container has (its image is empty).
    bound: Vec<PathBuf>,
    stop: Option<mpsc::Sender<()>>,
    owner: Option<std::thread::JoinHandle<()>>,
    _overlays: tempfile::TempDir,
}

impl std::fmt::Debug for DockerLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerLauncher")
            .field("env", &self.env.name)
            .field("container_id", &self.container_id)
            .finish()
    }
}

impl DockerLauncher {
    /// Build the image (cached by the engine) and start the environment's container.
    pub fn start(env: EnvSpec, mounts: &EnvMounts, extra_readonly: &[PathBuf]) -> Result<Self> {
        let container = env
            .container
            .clone()
            .with_context(|| format!("environment `{}` is not a container", env.name))?;
        let overlays = tempfile::Builder::new().prefix(OVERLAYS_PREFIX).tempdir()?;
        let request = DockerRequest::new(
            env.name,
            owner_label(env.name)?,
            &container,
            mounts,
            extra_readonly,
            overlays.path(),
        )?;
        let bound = request
            .binds
            .iter()
            .map(|(_, destination, _)| destination.clone())
            .collect();
        let (id_tx, id_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        // testcontainers is async and the Launcher API is not: a thread with its own runtime
        // owns the container from start to removal.
        let owner = std::thread::Builder::new()
            .name(format!("docker-{}", env.name))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = id_tx.send(Err(anyhow::anyhow!(err)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match request.start().await {
                        Ok(container) => {
                            let _ = id_tx.send(Ok(container.id().to_string()));
                            let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                            let _ = tokio::time::timeout(STOP_TIMEOUT, container.rm()).await;
                        }
                        Err(err) => {
                            let _ = id_tx.send(Err(err));
                        }
                    }
                });
            })?;
        let container_id = id_rx
            .recv_timeout(START_TIMEOUT)
            .context("timed out starting the Docker container")??;
        Ok(DockerLauncher {
            user: format!("{}:{}", container.uid, container.gid),
            uid: container.uid,
            bound,
            env,
            container_id,
            stop: Some(stop_tx),
            owner: Some(owner),
            _overlays: overlays,
        })
    }
}

impl DockerLauncher {
    /// The engine's id of the environment's container.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }
}

impl Drop for DockerLauncher {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(owner) = self.owner.take() {
            let _ = owner.join();
        }
    }
}

impl Launcher for DockerLauncher {
    fn environment(&self) -> &str {
        self.env.name
    }

    fn cannot_start(&self, program: &Path) -> Option<String> {
        crate::reachable::container_cannot_start(self.env.name, self.uid, &self.bound, program)
    }

    fn prepare(&self, process: &ProcessSpec) -> Result<PreparedCommand> {
        let mut command = tokio::process::Command::new("docker");
        command
            .args(["exec", "-i", "--user", &self.user, "--workdir"])
            .arg(&process.cwd);
        for (key, value) in &process.env {
            command.arg("--env").arg(format!("{key}={value}"));
        }
        command
            .arg(&self.container_id)
            .arg(&process.program)
            .args(&process.args)
            .kill_on_drop(true);
        Ok(PreparedCommand {
            command,
            guard: Box::new(()),
        })
    }
}

/// Everything the container is created with, computed from the spec before the async part.
struct DockerRequest {
    /// [`OWNER_LABEL`]'s value: who to ask whether the container is stale.
    owner: String,
    /// [`OVERLAYS_LABEL`]'s value: the folder to remove with a stale one.
    overlays: String,
    proc_masked: bool,
    masked_paths: Vec<String>,
    user: String,
    capabilities: Vec<String>,
    seccomp_profile: Option<String>,
    binds: Vec<(PathBuf, PathBuf, AccessMode)>,
}

impl DockerRequest {
    fn new(
        name: &str,
        owner: String,
        container: &ContainerSpec,
        mounts: &EnvMounts,
        extra_readonly: &[PathBuf],
        overlays: &Path,
    ) -> Result<Self> {
        let capabilities = container
            .capabilities
            .iter()
            .map(|cap| {
                serde_json::to_value(cap)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .context("capability name")
            })
            .collect::<Result<Vec<_>>>()?;
        let seccomp_profile = oci::seccomp(&container.seccomp)?
            .map(|filter| serde_json::to_string(&filter))
            .transpose()?;
        if container.ambient_capabilities {
            bail!("Docker cannot grant ambient capabilities (no option for them); run this environment on runc");
        }
        let mut binds = Vec::new();
        // The image is empty: the host's userland, read-only, as runc's read-only host root.
        for folder in HOST_USERLAND {
            let folder = Path::new(folder);
            if folder.exists() {
                binds.push((
                    folder.to_path_buf(),
                    folder.to_path_buf(),
                    AccessMode::ReadOnly,
                ));
            }
        }
        for folder in std::iter::once(&mounts.scratch).chain(mounts.writable.iter()) {
            binds.push((folder.clone(), folder.clone(), AccessMode::ReadWrite));
        }
        for folder in mounts.readonly.iter().chain(extra_readonly.iter()) {
            binds.push((folder.clone(), folder.clone(), AccessMode::ReadOnly));
        }
        // Made before its processes are known: the bundled bubblewraps are the declared ones.
        let targets = bwrap_targets(SystemBwrap::Always, None, &mounts.bundled_bwraps);
        for (source, destination) in bwrap_overlays(name, container.bwrap, &targets, overlays)? {
            // The empty image cannot hold the host's `/bin -> usr/bin` links, so such a folder
            // is a second bind of its target: cover the file there too.
            for alias in userland_aliases(&destination) {
                binds.push((source.clone(), alias, AccessMode::ReadOnly));
            }
            binds.push((source, destination, AccessMode::ReadOnly));
        }
        if let Some((source, destination)) = passwd_overlay(container.uid, container.gid, overlays)?
        {
            binds.push((source, destination, AccessMode::ReadOnly));
        }
        // Docker refuses two binds on one destination (runc mounts them in order): the stages may
        // name a folder twice (the harness binary serves the fake and the tap), and an overlay
        // must win over a plain bind of the same file, so the last bind of a destination stays.
        let mut seen = std::collections::HashSet::new();
        let mut binds: Vec<_> = binds
            .into_iter()
            .rev()
            .filter(|(_, destination, _)| seen.insert(destination.clone()))
            .collect();
        binds.reverse();
        Ok(DockerRequest {
            owner,
            overlays: overlays.display().to_string(),
            proc_masked: container.proc_masked,
            masked_paths: container
                .masked_paths
                .iter()
                .map(|p| p.to_string())
                .collect(),
            user: format!("{}:{}", container.uid, container.gid),
            capabilities,
            seccomp_profile,
            binds,
        })
    }

    async fn start(self) -> Result<testcontainers::ContainerAsync<testcontainers::GenericImage>> {
        let image = GenericBuildableImage::new(IMAGE_NAME, IMAGE_TAG)
            .with_dockerfile_string(DOCKERFILE)
            .build_image()
            .await
            .context("building the (empty) environment image from ci/docker/Dockerfile")?;
        let mut request = image
            .with_cmd(["/bin/sleep", "infinity"])
            .with_label(OWNER_LABEL, self.owner)
            .with_label(OVERLAYS_LABEL, self.overlays)
            .with_network("host")
            .with_user(self.user)
            .with_readonly_rootfs(true)
            .with_mount(Mount::tmpfs_mount("/tmp"))
            .with_cap_drop("ALL")
            // Docker confines with AppArmor where the host has it; the spec is the only
            // restriction we want.
            .with_security_opt("apparmor=unconfined");
        if !self.proc_masked {
            // Docker masks parts of /proc by default; the spec decides (runc: none unless
            // `proc_masked`). Empty lists, not absent ones: `docker run --security-opt
            // systempaths=unconfined` does the same through the API.
            let masked = self.masked_paths;
            request = request.with_host_config_modifier(move |config| {
                config.masked_paths = Some(masked.clone());
                config.readonly_paths = Some(Vec::new());
            });
        } else if !self.masked_paths.is_empty() {
            // A list given replaces Docker's defaults: give them back, then the spec's own.
            let mut masked: Vec<String> = MASKED_PATHS.iter().map(|p| p.to_string()).collect();
            masked.extend(self.masked_paths);
            request = request.with_host_config_modifier(move |config| {
                config.masked_paths = Some(masked.clone());
            });
        }
        for capability in self.capabilities {
            request = request.with_cap_add(capability);
        }
        request = match self.seccomp_profile {
            Some(profile) => request.with_security_opt(format!("seccomp={profile}")),
            // No rules: no filter, like the runc `container` control (Docker's default profile
            // would refuse user namespaces and turn the control into `userns-blocked`).
            None => request.with_security_opt("seccomp=unconfined"),
        };
        for (source, destination, mode) in self.binds {
            request = request.with_mount(
                Mount::bind_mount(
                    source.to_string_lossy().into_owned(),
                    destination.to_string_lossy().into_owned(),
                )
                .with_access_mode(mode),
            );
        }
        Ok(request.start().await?)
    }
}
