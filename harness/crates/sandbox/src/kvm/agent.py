"""The guest agent of the `kvm` runtime (sandbox::kvm): one TCP connection per process.

The host's relay (relay.py) sends one JSON line — the token of this boot, then what to run — and
frames: b"I" + 4-byte big-endian length + stdin bytes (length 0: stdin ends). The agent answers
with b"O" (stdout), b"E" (stderr) and one b"X" (the exit status as decimal text; -N: signal N).
The process runs in a mount namespace of its own: the host folders it was given at their own
paths (read-only unless writable), the host's root, the harness's share and this agent's token
unmounted, then as the given uid and gid, under the given AppArmor profile if any. A connection that ends first kills its process group.
"""

import json
import os
import signal
import socket
import struct
import subprocess
import threading
from _operator import _compare_digest  # hmac is not in python3-minimal

LISTEN = ("10.0.2.15", 7000)
HOST_LOOPBACK = "10.0.2.2"
TOKEN = open("/run/harness/token", "rb").read().strip()
HEADER_LIMIT = 1 << 20
CHUNK = 65536
forwarded_ports = set()
forwarded_lock = threading.Lock()


def recv_exact(sock, count):
    data = b""
    while len(data) < count:
        more = sock.recv(count - len(data))
        if not more:
            raise EOFError
        data += more
    return data


def read_header(sock):
    line = b""
    while not line.endswith(b"\n"):
        more = sock.recv(1)
        if not more or len(line) > HEADER_LIMIT:
            raise EOFError
        line += more
    return json.loads(line)


class Frames:
    def __init__(self, sock):
        self.sock = sock
        self.lock = threading.Lock()

    def send(self, kind, data):
        with self.lock:
            self.sock.sendall(kind + struct.pack(">I", len(data)) + data)


def pump_out(pipe, frames, kind):
    try:
        while True:
            data = os.read(pipe.fileno(), CHUNK)
            if not data:
                return
            frames.send(kind, data)
    except OSError:
        return


def pump_in(sock, process):
    """stdin frames into the process; the connection's end kills the process group."""
    try:
        while True:
            kind = recv_exact(sock, 1)
            (length,) = struct.unpack(">I", recv_exact(sock, 4))
            data = recv_exact(sock, length) if length else b""
            if kind != b"I":
                raise EOFError
            if not data:
                process.stdin.close()
                continue
            process.stdin.write(data)
            process.stdin.flush()
    except (EOFError, OSError):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def forward(port):
    """Guest 127.0.0.1:port reaches the host's 127.0.0.1:port (QEMU's user network)."""
    with forwarded_lock:
        if port in forwarded_ports:
            return
        listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
        forwarded_ports.add(port)

    def splice(source, sink):
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def serve():
        while True:
            client, _ = listener.accept()
            try:
                upstream = socket.create_connection((HOST_LOOPBACK, port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for pair in ((client, upstream), (upstream, client)):
                threading.Thread(target=splice, args=pair, daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def quote(word):
    """A shell word (shlex is not in python3-minimal)."""
    return "'" + word.replace("'", "'\\''") + "'"


def mount_point(path, is_folder):
    """Create `path` in the guest's root (a throwaway snapshot), every parent enterable."""
    parent = os.path.dirname(path)
    os.makedirs(parent if not is_folder else path, mode=0o755, exist_ok=True)
    walk = parent
    while walk not in ("/", ""):
        mode = os.stat(walk).st_mode
        if not mode & 0o001:
            os.chmod(walk, mode | 0o011)
        walk = os.path.dirname(walk)
    if not is_folder and not os.path.exists(path):
        open(path, "a").close()


def command_line(request):
    """The shell line that makes the process's mount namespace and becomes the process."""
    lines = ["set -e"]
    binds = sorted(request["binds"], key=lambda b: b["path"].rstrip("/").count("/"))
    for bind in binds:
        path = bind["path"]
        source = "/host" + path
        if not os.path.lexists(source):
            continue
        mount_point(path, os.path.isdir(source))
        quoted = quote(path)
        lines.append(f"mount --bind {quote(source)} {quoted}")
        if not bind["writable"]:
            lines.append(f"mount -o remount,bind,ro {quoted}")
    lines.append("umount -l /host /run/harness")
    lines.append(f"cd {quote(request['cwd'])}")
    env = [f"{key}={value}" for key, value in request["env"]]
    run = ["env", "-i", *env, request["program"], *request["args"]]
    if request.get("apparmor_profile"):
        # After the uid change (the profile leaves no capability to change it with).
        onexec = 'printf "exec %s" "$0" >/proc/self/attr/apparmor/exec && exec "$@"'
        run = ["/bin/sh", "-c", onexec, request["apparmor_profile"], *run]
    run = ["setpriv", f"--reuid={request['uid']}", f"--regid={request['gid']}", "--clear-groups",
           "--", *run]
    lines.append("exec " + " ".join(quote(word) for word in run))
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines)]


def serve_connection(sock):
    frames = Frames(sock)
    try:
        request = read_header(sock)
        if not _compare_digest(str(request.get("token", "")).encode(), TOKEN):
            frames.send(b"E", b"kvm agent: wrong token\n")
            frames.send(b"X", b"125")
            return
        if request.get("op") == "ping":
            frames.send(b"X", b"0")
            return
        for port in request.get("forward_tcp", []):
            forward(int(port))
        process = subprocess.Popen(command_line(request), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
    except (EOFError, OSError, ValueError, KeyError) as error:
        try:
            frames.send(b"E", f"kvm agent: {error!r}\n".encode())
            frames.send(b"X", b"125")
        except OSError:
            pass
        sock.close()
        return
    threading.Thread(target=pump_in, args=(sock, process), daemon=True).start()
    outs = [threading.Thread(target=pump_out, args=(pipe, frames, kind))
            for pipe, kind in ((process.stdout, b"O"), (process.stderr, b"E"))]
    for thread in outs:
        thread.start()
    for thread in outs:
        thread.join()
    code = process.wait()
    try:
        frames.send(b"X", str(code).encode())
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main():
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    listener = socket.create_server(LISTEN)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve_connection, args=(sock,), daemon=True).start()


main()
