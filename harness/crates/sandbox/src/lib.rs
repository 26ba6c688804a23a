//! Where processes run, and that nothing they start outlives them.
//!
//! Owns: the [`launcher::Launcher`] trait (host, runc, Docker) and the mounts it binds; the
//! restricted environments as data ([`spec`], [`catalogue`]) and their runtimes ([`oci`],
//! [`overlays`], [`runc`], [`docker`], [`kvm`]: a virtual machine on a real kernel,
//! [`environment`], [`probe`]); a host process in a mount
//! namespace where the evidence is read-only ([`isolation`]); whether a container's uid can start a program at all ([`reachable`]); process containment (one
//! cgroup per cell: [`cgroup`], [`containment`]); who owns a container ([`owner`]); what the
//! process must tear down before it ends ([`teardown`]); every reaper ([`reap`]); and the small
//! system helpers everyone shares ([`system`]: one `which`, one bounded child wait, one bounded
//! command's output).
//!
//! May use: `graders` (the bubblewrap messages the environments name) and third-party crates.
//! Nothing of the harness above it: it knows no driver, app-server, cell or report. It installs
//! no signal handler: the binary does, and calls [`teardown::tear_down_everything`].

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod catalogue;
pub mod catalogue_doc;
pub mod cgroup;
pub mod containment;
pub mod docker;
pub mod environment;
pub mod isolation;
pub mod kvm;
pub mod launcher;
pub mod oci;
pub mod overlays;
pub mod owner;
pub mod prestart;
pub mod probe;
pub mod reachable;
pub mod reap;
pub mod runc;
pub mod spec;
pub mod system;
pub mod teardown;
