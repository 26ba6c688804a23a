//! The one table of output signatures the graders recognise: sandbox-launcher failures (the
//! command never ran) and ordinary filesystem refusals (the command ran and the kernel refused
//! the write). Every grader classifies output through [`classify_line`] / [`scan`]; no other
//! module matches these texts.
//!
//! Matching is per line and by plain substrings (no regexes): the real texts are fixed strings
//! printed by bubblewrap, Codex's sandbox helper and the shell, and stdout/stderr order inside
//! merged output is not stable, so only "does some line say X" is meaningful.

/// What a matched line means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureClass {
    /// The sandbox launcher failed: the command itself never ran.
    LauncherFailure,
    /// The command ran and the filesystem refused the write.
    FilesystemRefusal,
}

/// One recognised text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Stable name, used in verdict reasons.
    pub name: &'static str,
    pub class: SignatureClass,
    /// The line must start with this (after leading whitespace), if set.
    pub line_prefix: Option<&'static str>,
    /// Every one of these must occur somewhere in the same line.
    pub all_of: &'static [&'static str],
    /// What the signature tells about the environment the command ran in.
    pub indicates: &'static str,
}

use SignatureClass::{FilesystemRefusal, LauncherFailure};

/// Launcher failures come first: a launcher line such as
/// `bwrap: setting up uid map: Permission denied` must never count as a filesystem refusal, and
/// the first matching row wins.
pub const SIGNATURES: &[Signature] = &[
    Signature {
        name: "bwrap-uid-map",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "setting up uid map"],
        indicates:
            "bubblewrap cannot write its uid_map: a non-dumpable bwrap run as non-root, or an \
                    LSM restricting unprivileged user namespaces (the Daytona symptom)",
    },
    Signature {
        name: "bwrap-gid-map",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "setting up gid map"],
        indicates: "bubblewrap cannot write its gid_map: user-namespace id mapping refused",
    },
    Signature {
        name: "bwrap-loopback-rtm-newaddr",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "loopback: Failed RTM_NEWADDR"],
        indicates: "the runtime refuses rtnetlink address setup inside the sandbox's network \
                    namespace (seccomp filter, or no CAP_NET_ADMIN over the new netns)",
    },
    Signature {
        name: "bwrap-loopback-rtm-newlink",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "loopback: Failed RTM_NEWLINK"],
        indicates:
            "the runtime refuses bringing up loopback inside the sandbox's network namespace",
    },
    Signature {
        name: "bwrap-no-userns-kernel",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "kernel does not support user namespaces"],
        indicates: "the kernel answers user-namespace creation with EINVAL: built without user \
                    namespaces, or WSL1",
    },
    Signature {
        name: "bwrap-namespace-create-failed",
        class: LauncherFailure,
        line_prefix: None,
        // The colon leaves out `Creating new namespace failed, likely because the kernel does
        // not support user namespaces` (EINVAL), another cause with a row of its own.
        all_of: &["bwrap", "Creating new namespace failed:"],
        indicates: "no new namespaces can be created: max_user_namespaces is 0, nesting depth \
                    exceeded, or no CAP_SYS_ADMIN in a container",
    },
    Signature {
        name: "bwrap-namespace-no-permission",
        class: LauncherFailure,
        line_prefix: None,
        // bubblewrap 0.8 says `create new namespace`, 0.12 `create a new namespace`.
        all_of: &["bwrap", "No permissions to create", "new namespace"],
        indicates: "the kernel does not let this bubblewrap create its namespaces here (a sysctl, a seccomp filter or an AppArmor user-namespace restriction)",
    },
    Signature {
        name: "bwrap-missing-sandbox-helper",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["execvp", "codex-linux-sandbox", "No such file or directory"],
        indicates:
            "Codex's codex-linux-sandbox helper alias is missing inside the sandbox (TMPDIR \
                    is a parent of CODEX_HOME, or the helper is not mounted)",
    },
    Signature {
        name: "bwrap-mount-proc",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "Can't mount proc"],
        indicates: "the container forbids mounting a new /proc (masked /proc or no CAP_SYS_ADMIN)",
    },
    Signature {
        name: "bwrap-make-root-slave",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "Failed to make / slave"],
        indicates: "mount propagation cannot be changed: no mount namespace privileges",
    },
    Signature {
        name: "bwrap-pivot-root-denied",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "pivot_root: Permission denied"],
        indicates: "an LSM refuses bubblewrap's pivot_root (LXC without nesting)",
    },
    Signature {
        name: "bwrap-pivot-root-initramfs",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "pivot_root: Invalid argument"],
        indicates: "the root filesystem cannot be pivoted away from: an initramfs or rootfs root \
                    (Unraid, some live systems)",
    },
    Signature {
        name: "bwrap-mount-devpts",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "Can't mount devpts"],
        indicates: "a fresh devpts cannot be mounted for `--dev` (SELinux, rootless Podman with \
                    --userns=keep-id)",
    },
    Signature {
        name: "bwrap-overflowids-unreadable",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "/proc/sys/kernel/overflow"],
        indicates: "/proc/sys/kernel is hidden or empty (masked, Termux/Android, old gVisor): \
                    bubblewrap stops before it reads its arguments",
    },
    Signature {
        name: "bwrap-unexpected-capabilities",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap", "Unexpected capabilities but not setuid"],
        indicates: "a non-root process holds capabilities (ambient or file capabilities), which a \
                    non-setuid bubblewrap refuses",
    },
    Signature {
        name: "bubblewrap-unavailable",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bubblewrap is unavailable"],
        indicates: "Codex found no bubblewrap at all: no system bwrap on PATH and no bundled \
                    codex-resources/bwrap next to the Codex executable",
    },
    Signature {
        name: "bwrap-not-executable",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["bwrap: ", "(os error "],
        indicates: "bubblewrap itself could not be executed (a spawn error, e.g. EACCES or ENOENT \
                    on the bwrap binary): the command never ran",
    },
    Signature {
        name: "sandbox-helper-panicked",
        class: LauncherFailure,
        line_prefix: None,
        all_of: &["panicked at", "linux-sandbox"],
        indicates: "Codex's sandbox helper aborted before running the command (e.g. the profile \
                    does not mount /bin or /usr, so `sh` cannot be executed)",
    },
    Signature {
        name: "bwrap-fatal-other",
        class: LauncherFailure,
        line_prefix: Some("bwrap: "),
        all_of: &[],
        indicates: "bubblewrap aborted before running the command for a reason not listed above",
    },
    Signature {
        name: "read-only-file-system",
        class: FilesystemRefusal,
        line_prefix: None,
        all_of: &["Read-only file system"],
        indicates: "the command ran; the target is mounted read-only (EROFS), as a read-only \
                    sandbox profile does",
    },
    Signature {
        name: "permission-denied",
        class: FilesystemRefusal,
        line_prefix: None,
        all_of: &["Permission denied"],
        indicates: "the command ran; the write was refused with EACCES (sandbox or file ownership)",
    },
    Signature {
        name: "operation-not-permitted",
        class: FilesystemRefusal,
        line_prefix: None,
        all_of: &["Operation not permitted"],
        indicates: "the command ran; the write was refused with EPERM",
    },
];

/// The exact texts users of Codex see in the restricted environments (Debian's bubblewrap
/// 0.8.0 and Codex 0.169.0), next to the rows above that classify them: the environments'
/// specs (`sandbox::catalogue`) name their message and canary signature by these constants, and
/// a test there holds every one of them to a row of [`SIGNATURES`] other than the generic
/// `bwrap-fatal-other`. A `*_SIGNATURE` is the line a canary's stderr must contain (a prefix of
/// the message where bubblewrap goes on); a `*_MESSAGE` is the whole text.
pub mod messages {
    pub const RTM_NEWADDR_SIGNATURE: &str =
        "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";
    pub const UID_MAP_SIGNATURE: &str = "bwrap: setting up uid map: Permission denied";
    pub const USERNS_SIGNATURE: &str = "bwrap: No permissions to create new namespace";
    pub const MOUNT_SLAVE_SIGNATURE: &str = "bwrap: Failed to make / slave: Permission denied";
    pub const MOUNT_PROC_SIGNATURE: &str =
        "bwrap: Can't mount proc on /newroot/proc: Operation not permitted";
    /// Debian's bubblewrap 0.8.0 wording (newer releases spell out `max_user_namespaces`).
    pub const USERNS_LIMIT_SIGNATURE: &str =
        "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_";
    pub const NO_USERNS_KERNEL_SIGNATURE: &str =
        "bwrap: Creating new namespace failed, likely because the kernel does not support user namespaces.";
    /// The full texts of Debian's bubblewrap 0.8.0 where the canary signature is a prefix.
    pub const USERNS_MESSAGE: &str = "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.";
    pub const USERNS_LIMIT_MESSAGE: &str = "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)";
    /// Debian 13's bubblewrap 0.12.0, where user namespaces are refused (EPERM or EACCES).
    pub const USERNS_MESSAGE_BWRAP_012: &str = "bwrap: No permissions to create a new namespace, likely because the kernel does not allow non-privileged user namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.";
    pub const NO_USERNS_KERNEL_MESSAGE: &str = "bwrap: Creating new namespace failed, likely because the kernel does not support user namespaces.  bwrap must be installed setuid on such systems.";
    pub const MOUNT_DEVPTS_SIGNATURE: &str =
        "bwrap: Can't mount devpts on /newroot/dev/pts: Permission denied";
    pub const OVERFLOWUID_SIGNATURE: &str =
        "bwrap: Can't read /proc/sys/kernel/overflowuid: No such file or directory";
    pub const PIVOT_ROOT_INITRAMFS_SIGNATURE: &str = "bwrap: pivot_root: Invalid argument";
    pub const AMBIENT_CAPS_SIGNATURE: &str =
        "bwrap: Unexpected capabilities but not setuid, old file caps config?";
    /// The first line of what Codex 0.169.0's sandbox helper prints (exit 101) when it finds no
    /// bubblewrap at all (the line tool outputs and evidence excerpts keep).
    pub const NO_BWRAP_SIGNATURE: &str = "bubblewrap is unavailable";
    /// What Codex 0.169.0 prints for a sandboxed command when it finds no bubblewrap at all.
    pub const NO_BWRAP_MESSAGE: &str = "bubblewrap is unavailable: no system bwrap was found on PATH and no bundled codex-resources/bwrap binary was found next to the Codex executable";
    /// The summary of Codex 0.169.0's `configWarning` when no system bubblewrap is on PATH (also
    /// when there is no bundled one either).
    pub const NO_SYSTEM_BWRAP_WARNING: &str = "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled bubblewrap in the meantime.";
}

impl Signature {
    /// Whether this row matches one line (whether or not an earlier row matches it too).
    pub fn matches(&self, line: &str) -> bool {
        let trimmed = line.trim_start();
        self.line_prefix.is_none_or(|p| trimmed.starts_with(p))
            && self.all_of.iter().all(|needle| trimmed.contains(needle))
    }
}

/// The first table row matching one line, if any.
pub fn classify_line(line: &str) -> Option<&'static Signature> {
    SIGNATURES.iter().find(|s| s.matches(line))
}

/// A line of some output that matched a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit<'a> {
    pub signature: &'static Signature,
    pub line: &'a str,
}

/// What one block of output shows: the first launcher-failure line and the first
/// filesystem-refusal line (a launcher line never counts as a refusal).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan<'a> {
    pub launcher_failure: Option<Hit<'a>>,
    pub refusal: Option<Hit<'a>>,
}

/// Whether some line of `text` could match a launcher-failure row: every such row needs its
/// first text (or its line prefix) somewhere, so text without any of them is skipped whole.
pub fn may_hold_launcher_failure(text: &str) -> bool {
    SIGNATURES
        .iter()
        .filter(|s| s.class == LauncherFailure)
        .filter_map(|s| s.all_of.first().copied().or(s.line_prefix))
        .any(|key| text.contains(key.trim()))
}

/// Whether some line of `text` could match any row (launcher failure or refusal).
fn may_hold_signature(text: &str) -> bool {
    SIGNATURES
        .iter()
        .filter_map(|s| s.all_of.first().copied().or(s.line_prefix))
        .any(|key| text.contains(key.trim()))
}

pub fn scan(output: &str) -> Scan<'_> {
    let mut found = Scan::default();
    if !may_hold_signature(output) {
        return found;
    }
    for line in output.lines() {
        let Some(signature) = classify_line(line) else {
            continue;
        };
        let slot = match signature.class {
            LauncherFailure => &mut found.launcher_failure,
            FilesystemRefusal => &mut found.refusal,
        };
        // A helper's panic names its cause on the lines after `panicked at`: a specific launcher
        // row found there says more than the generic panic row.
        let upgrades_panic = signature.class == LauncherFailure
            && signature.name != HELPER_PANICKED
            && slot
                .as_ref()
                .is_some_and(|h| h.signature.name == HELPER_PANICKED);
        if slot.is_none() || upgrades_panic {
            *slot = Some(Hit { signature, line });
        }
        let launcher_settled = found
            .launcher_failure
            .as_ref()
            .is_some_and(|h| h.signature.name != HELPER_PANICKED);
        if launcher_settled && found.refusal.is_some() {
            break;
        }
    }
    found
}

/// The generic row for a panic of Codex's sandbox helper, which a more specific launcher row on
/// a later line of the same output replaces.
const HELPER_PANICKED: &str = "sandbox-helper-panicked";

/// The first filesystem-refusal line of `output` that names one of `names` (a refusal of a
/// write to that file; a refusal of another file in the same output does not count).
pub fn refusal_naming<'a>(output: &'a str, names: &[&str]) -> Option<Hit<'a>> {
    output.lines().find_map(|line| {
        let signature = classify_line(line).filter(|s| s.class == FilesystemRefusal)?;
        names
            .iter()
            .any(|name| !name.is_empty() && line.contains(name))
            .then_some(Hit { signature, line })
    })
}

/// Whether `text` (a command line) itself holds some refusal row's text: such a command can
/// print the refusal without any write having been refused (`echo '…: Read-only file
/// system'`). Quote characters and backslashes are dropped first, so `'Read-only'' file
/// system'` is caught too.
pub fn mentions_refusal_text(text: &str) -> bool {
    let plain: String = text
        .chars()
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect();
    SIGNATURES
        .iter()
        .filter(|s| s.class == FilesystemRefusal)
        .any(|s| {
            [text, plain.as_str()]
                .iter()
                .any(|t| s.all_of.iter().all(|needle| t.contains(needle)))
        })
}

/// A tool output the real Codex sends back to the model for an exec tool:
/// `Chunk ID: …\nWall time: …\nProcess exited with code N\nOriginal token count: …\nOutput:\n<merged output>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecToolOutput<'a> {
    pub exit_code: Option<i64>,
    /// The merged stdout/stderr after the `Output:` line (the whole text when there is no header).
    pub output: &'a str,
}

const EXIT_LINE_PREFIX: &str = "Process exited with code ";
const OUTPUT_MARKER: &str = "Output:\n";

/// Split a model-visible exec tool output into exit code and output. Text without the Codex
/// header is returned whole with an unknown exit code; only header lines before `Output:` are
/// trusted, so a command that prints `Process exited with code 0` cannot fake its own exit code.
pub fn parse_exec_tool_output(text: &str) -> ExecToolOutput<'_> {
    let (header, output) = if let Some(rest) = text.strip_prefix(OUTPUT_MARKER) {
        ("", rest)
    } else if let Some(at) = text.find(&format!("\n{OUTPUT_MARKER}")) {
        (&text[..at], &text[at + 1 + OUTPUT_MARKER.len()..])
    } else {
        return ExecToolOutput {
            exit_code: None,
            output: text,
        };
    };
    let exit_code = header
        .lines()
        .find_map(|l| l.strip_prefix(EXIT_LINE_PREFIX))
        .and_then(|n| n.trim().parse::<i64>().ok());
    ExecToolOutput { exit_code, output }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_codex_texts_classify() {
        let cases = [
            ("bwrap: setting up uid map: Permission denied", "bwrap-uid-map"),
            ("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted", "bwrap-loopback-rtm-newaddr"),
            ("bwrap: loopback: Failed RTM_NEWADDR: No child processes", "bwrap-loopback-rtm-newaddr"),
            ("bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)", "bwrap-namespace-create-failed"),
            ("bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces", "bwrap-namespace-no-permission"),
            ("bwrap: execvp /h/tmp/arg0-linux/codex-arg0b2rzZi/codex-linux-sandbox: No such file or directory", "bwrap-missing-sandbox-helper"),
            ("error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: setting up uid map: Permission denied", "bwrap-uid-map"),
            ("thread 'main' (2) panicked at linux-sandbox/src/linux_run_main.rs:1199:5: Failed to execvp sh: No such file or directory", "sandbox-helper-panicked"),
            ("bwrap: Unexpected capabilities but not setuid, old file caps config?", "bwrap-unexpected-capabilities"),
            ("/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system", "read-only-file-system"),
            ("sh: 1: cannot create probe.txt: Permission denied", "permission-denied"),
            ("sh: x: Operation not permitted", "operation-not-permitted"),
        ];
        for (line, name) in cases {
            assert_eq!(classify_line(line).map(|s| s.name), Some(name), "{line}");
        }
        assert_eq!(classify_line("WRITE_REFUSED"), None);
        assert_eq!(
            classify_line("cat: notes.txt: No such file or directory"),
            None
        );
    }

    #[test]
    fn restricted_environment_texts_are_launcher_failures() {
        let cases = [
            ("bwrap: Failed to make / slave: Permission denied", "bwrap-make-root-slave"),
            ("bwrap: pivot_root: Permission denied", "bwrap-pivot-root-denied"),
            ("bwrap: pivot_root: Invalid argument", "bwrap-pivot-root-initramfs"),
            ("bwrap: Can't mount devpts on /newroot/dev/pts: Permission denied", "bwrap-mount-devpts"),
            ("bwrap: Can't read /proc/sys/kernel/overflowuid: No such file or directory", "bwrap-overflowids-unreadable"),
            ("bwrap: Can't parse /proc/sys/kernel/overflowgid", "bwrap-overflowids-unreadable"),
            ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted", "bwrap-mount-proc"),
            // bubblewrap 0.12 names the target inside the sandbox, which defeats Codex's retry.
            ("bwrap: Can't mount proc on /proc: Operation not permitted", "bwrap-mount-proc"),
            ("bwrap: Creating new namespace failed, likely because the kernel does not support user namespaces.  bwrap must be installed setuid on such systems.", "bwrap-no-userns-kernel"),
            ("bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_user_namespaces exceeded", "bwrap-namespace-create-failed"),
            ("bubblewrap is unavailable: no system bwrap was found on PATH and no bundled codex-resources/bwrap binary was found next to the Codex executable", "bubblewrap-unavailable"),
            ("/usr/bin/bwrap: Permission denied (os error 13)", "bwrap-not-executable"),
            // gVisor (Debian 13's runsc 0.0~20240729): a new network namespace has no `lo` under
            // --network=host, and bubblewrap's first mount is refused with or without --unshare-net.
            ("bwrap: loopback: Failed to look up lo: No such device", "bwrap-fatal-other"),
            ("bwrap: Failed to make / slave: Operation not permitted", "bwrap-make-root-slave"),
            ("bwrap: loopback: Failed RTM_NEWADDR: No child process", "bwrap-loopback-rtm-newaddr"),
        ];
        for (line, name) in cases {
            let found = classify_line(line).unwrap_or_else(|| panic!("unclassified: {line}"));
            assert_eq!(found.name, name, "{line}");
            assert_eq!(found.class, LauncherFailure, "{line}");
        }
    }

    #[test]
    fn a_helper_panic_is_named_by_the_cause_on_its_next_line() {
        let output = "thread 'main' (2) panicked at linux-sandbox/src/launcher.rs:60:13:\nbubblewrap is unavailable: no system bwrap was found on PATH\n";
        let hit = scan(output).launcher_failure.expect("a launcher failure");
        assert_eq!(hit.signature.name, "bubblewrap-unavailable");
        let bare = "thread 'main' (2) panicked at linux-sandbox/src/linux_run_main.rs:1199:5:\nFailed to execvp sh\n";
        let hit = scan(bare).launcher_failure.expect("a launcher failure");
        assert_eq!(hit.signature.name, HELPER_PANICKED);
    }

    #[test]
    fn launcher_lines_never_count_as_refusals() {
        let s = scan("bwrap: setting up uid map: Permission denied\nWRITE_REFUSED\n");
        assert_eq!(s.launcher_failure.unwrap().signature.name, "bwrap-uid-map");
        assert!(s.refusal.is_none());
    }

    #[test]
    fn refusals_must_name_the_file_and_commands_that_print_them_are_spotted() {
        let out = "touch: cannot touch 'other.txt': Read-only file system\n/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\n";
        let hit = refusal_naming(out, &["plan-write-probe-1.txt"]).unwrap();
        assert!(hit.line.contains("plan-write-probe-1.txt"));
        assert!(refusal_naming(out, &["plan-write-probe-2.txt"]).is_none());
        assert!(refusal_naming(
            "bwrap: setting up uid map: Permission denied plan-write-probe-1.txt",
            &["plan-write-probe-1.txt"]
        )
        .is_none());
        assert!(mentions_refusal_text("echo 'x: Read-only file system'"));
        assert!(mentions_refusal_text("echo 'Read-only'' file \\system'"));
        assert!(!mentions_refusal_text(
            "printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED"
        ));
    }

    #[test]
    fn exec_tool_output_header_is_parsed() {
        let text = "Chunk ID: 144c48\nWall time: 0.0000 seconds\nProcess exited with code 1\nOriginal token count: 16\nOutput:\nbwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n";
        let parsed = parse_exec_tool_output(text);
        assert_eq!(parsed.exit_code, Some(1));
        assert_eq!(
            parsed.output,
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"
        );
        let forged = parse_exec_tool_output("hello\nProcess exited with code 0\n");
        assert_eq!(forged.exit_code, None);
        let in_output = parse_exec_tool_output(
            "Process exited with code 2\nOutput:\nProcess exited with code 0\n",
        );
        assert_eq!(in_output.exit_code, Some(2));
    }
}
