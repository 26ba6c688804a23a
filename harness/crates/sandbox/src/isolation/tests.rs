//! What an isolated process can and cannot do, tried by a shell script under each of the two
//! ways in: a root harness (a uid of the cell's own) and a harness that is not root (its own uid,
//! in user namespaces).

use super::*;

/// The folders of one trial: `evidence/` (hidden but its `own/` part, writable, and
/// `own/task.json`, read-only), `elsewhere/` (the harness's: its binary, its cache) and a
/// root-only file.
struct Folders {
    root: tempfile::TempDir,
}

impl Folders {
    fn new() -> Folders {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let own = root.path().join("evidence/own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere")).unwrap();
        std::fs::write(root.path().join("evidence/transcript.jsonl"), "recorded\n").unwrap();
        std::fs::write(own.join("task.json"), "{}").unwrap();
        std::fs::write(root.path().join("elsewhere/harness"), "binary\n").unwrap();
        std::fs::write(root.path().join("elsewhere/secret"), "secret\n").unwrap();
        std::fs::set_permissions(
            root.path().join("elsewhere/secret"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        Folders { root }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    fn isolation(&self, run_as: Option<DriverIds>) -> Isolation {
        Isolation {
            hidden: vec![self.path("evidence")],
            private: private_folders(),
            writable: vec![self.path("evidence/own")],
            read_only: vec![self.path("evidence/own/task.json")],
            run_as,
            host_network: false,
            replaced: Vec::new(),
        }
    }

    /// Hand everything to `uid` (the harness that is not root owns its files).
    fn chown_all(&self, uid: u32) {
        for entry in walk(self.root.path()) {
            std::os::unix::fs::lchown(&entry, Some(uid), Some(uid)).unwrap();
        }
    }
}

fn walk(path: &Path) -> Vec<PathBuf> {
    let mut all = vec![path.to_path_buf()];
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            all.extend(walk(&entry.unwrap().path()));
        }
    }
    all
}

/// Each line says what the process managed; the test reads which lines are there. Its `/tmp`
/// is its own: what it writes there must not reach the host's.
const ATTACK: &str = r#"
echo forged > evidence/transcript.jsonl 2>/dev/null && echo evidence-written
cat evidence/transcript.jsonl 2>/dev/null && echo evidence-read
echo mine > evidence/own/workspace-file && echo own-written
echo forged > evidence/own/task.json 2>/dev/null && echo task-written
umount evidence 2>/dev/null && echo unmounted
umount -l evidence/own/task.json 2>/dev/null && echo task-unmounted
mount -o remount,bind,rw evidence/own/task.json 2>/dev/null && echo remounted
echo forged > elsewhere/harness 2>/dev/null && echo binary-written
cat elsewhere/secret 2>/dev/null && echo secret-read
echo big > /tmp/isolation-trial-left-behind && echo tmp-written
for procs in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do
  echo $$ > "$procs" 2>/dev/null && echo "cgroup-left $procs" && break
done
grep -q '^0::/$' /proc/self/cgroup && echo cgroup-namespace
python3 -c "import socket; socket.create_connection(('127.0.0.1', $HOST_PORT), 2)" 2>/dev/null && echo host-port-reached
python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); socket.create_connection(s.getsockname(), 2)" 2>/dev/null && echo own-loopback
ls /proc/1/root/ >/dev/null 2>&1 && echo host-root-reached
echo "uid $(id -u)"
"#;

fn run_isolated(folders: &Folders, isolation: &Isolation, as_uid: Option<u32>) -> String {
    // A service of the host's, on its loopback: out of the process's reach.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", ATTACK])
        .env("HOST_PORT", host.local_addr().unwrap().port().to_string())
        .current_dir(folders.root.path());
    let harness = match as_uid {
        Some(uid) => {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
            (uid, uid)
        }
        None => harness_ids(),
    };
    isolate(&mut command, isolation, Some(folders.root.path()), harness).unwrap();
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn assert_held(folders: &Folders, said: &str, uid: u32) {
    assert_eq!(
        said,
        format!("own-written\ntmp-written\ncgroup-namespace\nown-loopback\nuid {uid}\n"),
        "what the isolated process managed"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("evidence/transcript.jsonl")).unwrap(),
        "recorded\n"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("evidence/own/task.json")).unwrap(),
        "{}"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("elsewhere/harness")).unwrap(),
        "binary\n"
    );
    assert!(!Path::new("/tmp/isolation-trial-left-behind").exists());
}

/// Loud, and a failure where every prerequisite must be there.
fn ignored(why: &str) {
    assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "CI=true: {why}");
    eprintln!("ignored: {why}");
}

#[test]
fn a_driver_of_a_root_harness_writes_only_its_own_part_as_a_uid_of_its_own_needs_root() {
    if !nix::unistd::geteuid().is_root() {
        return ignored("needs root");
    }
    let folders = Folders::new();
    let ids = DriverIds::fresh();
    ids.open_to_driver(&[&folders.path("evidence/own")])
        .unwrap();
    let said = run_isolated(&folders, &folders.isolation(Some(ids)), None);
    assert_held(&folders, &said, ids.uid);
    // Its own part is still root's, given to the cell's group.
    let own = std::fs::metadata(folders.path("evidence/own")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((own.uid(), own.gid()), (0, ids.gid));
}

/// The harness that is not root (made so by root, as a harness started by that user would be):
/// its driver keeps its uid, and what it must not write is read-only or absent all the same.
#[test]
fn a_driver_of_an_unprivileged_harness_is_held_the_same_way_needs_root() {
    if !nix::unistd::geteuid().is_root() {
        return ignored("needs root (to become another uid)");
    }
    let folders = Folders::new();
    folders.chown_all(65534);
    let mut isolation = folders.isolation(None);
    // Its own files: the harness's binary is made read-only by the view, not by their owner.
    isolation.read_only.push(folders.path("elsewhere"));
    let said = run_isolated(&folders, &isolation, Some(65534));
    // Its own secret it may read: it is the same user.
    assert_eq!(
        said.replace("secret\nsecret-read\n", ""),
        "own-written\ntmp-written\ncgroup-namespace\nown-loopback\nuid 65534\n"
    );
    assert_eq!(
        std::fs::read_to_string(folders.path("elsewhere/harness")).unwrap(),
        "binary\n"
    );
    assert!(!Path::new("/tmp/isolation-trial-left-behind").exists());
}

#[test]
fn fresh_driver_ids_lie_in_their_range_and_differ() {
    let a = DriverIds::fresh();
    let b = DriverIds::fresh();
    for ids in [a, b] {
        assert!(ids.uid >= DriverIds::BASE && ids.uid < DriverIds::BASE + (1 << 24));
        assert_eq!(ids.uid, ids.gid);
    }
    assert_ne!(a, b);
}

/// A working folder named through a folder the view hides (`hidden/../evidence/own`, as a
/// drivers file's folder given as `repo/harness/../drivers` is) is entered as the kernel
/// resolves it.
#[test]
fn a_working_folder_named_through_a_hidden_folder_is_entered_needs_root() {
    if !nix::unistd::geteuid().is_root() {
        return ignored("needs root");
    }
    let folders = Folders::new();
    std::fs::create_dir_all(folders.path("elsewhere/hidden")).unwrap();
    let ids = DriverIds::fresh();
    ids.open_to_driver(&[&folders.path("evidence/own")])
        .unwrap();
    let mut isolation = folders.isolation(Some(ids));
    isolation.hidden.push(folders.path("elsewhere"));
    let through = folders.path("elsewhere/hidden/../../evidence/own");
    let mut command = std::process::Command::new("/bin/pwd");
    isolate(&mut command, &isolation, Some(&through), harness_ids()).unwrap();
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        std::fs::canonicalize(folders.path("evidence/own"))
            .unwrap()
            .display()
            .to_string()
    );
}

/// An app-server's view: the host's loopback in reach (the mock model API), and a file shown
/// read-only in `/etc/passwd`'s place, naming its uid; the host's `/etc/passwd` unchanged.
#[test]
fn an_app_server_keeps_the_host_network_and_sees_a_passwd_naming_it_needs_root() {
    if !nix::unistd::geteuid().is_root() {
        return ignored("needs root");
    }
    let folders = Folders::new();
    let ids = DriverIds::fresh();
    let passwd = folders.path("elsewhere/passwd");
    std::fs::write(
        &passwd,
        format!("cell:x:{}:{}::/:/bin/bash\n", ids.uid, ids.gid),
    )
    .unwrap();
    let mut isolation = folders.isolation(Some(ids));
    isolation.host_network = true;
    isolation.replaced = vec![(passwd, "/etc/passwd".into())];
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let script = r#"
python3 -c "import os, socket; socket.create_connection(('127.0.0.1', int(os.environ['HOST_PORT'])), 2)" && echo host-reached
grep -q "^cell:x:$(id -u):" /etc/passwd && echo named
(echo forged >> /etc/passwd) 2>/dev/null && echo passwd-written
true
"#;
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", script])
        .env("HOST_PORT", host.local_addr().unwrap().port().to_string());
    let before = std::fs::read("/etc/passwd").unwrap();
    isolate(
        &mut command,
        &isolation,
        Some(folders.root.path()),
        harness_ids(),
    )
    .unwrap();
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "host-reached\nnamed\n"
    );
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), before);
}
