"""The host end of one process of the `kvm` runtime (sandbox::kvm): what the harness spawns.

argv: the agent's forwarded port on the host's loopback, the file holding this boot's token.
$HARNESS_KVM_EXEC: what to run, as JSON (not argv: other users read a process's argv). Relays
this process's stdin to the agent and the agent's stdout and stderr frames back (framing in
agent.py), then exits as the guest process did (a signal N as 128 + N). Anything that breaks the
connection ends this relay with 125 and says why on stderr.
"""

import json
import os
import socket
import struct
import sys
import threading

CONNECT_TIMEOUT = 10
CHUNK = 65536


def fail(why):
    os.write(2, f"kvm relay: {why}\n".encode())
    os._exit(125)


def recv_exact(sock, count):
    data = b""
    while len(data) < count:
        more = sock.recv(count - len(data))
        if not more:
            fail("the agent closed the connection before the process's exit status")
        data += more
    return data


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def pump_stdin(sock, lock):
    try:
        while True:
            data = os.read(0, CHUNK)
            with lock:
                sock.sendall(b"I" + struct.pack(">I", len(data)) + data)
            if not data:
                return
    except OSError:
        return


def main():
    port, token_file = int(sys.argv[1]), sys.argv[2]
    request = json.loads(os.environ["HARNESS_KVM_EXEC"])
    with open(token_file) as file:
        request["token"] = file.read().strip()
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
        sock.settimeout(None)
        sock.sendall(json.dumps(request).encode() + b"\n")
    except OSError as error:
        fail(f"cannot reach the agent on 127.0.0.1:{port}: {error}")
    threading.Thread(target=pump_stdin, args=(sock, threading.Lock()), daemon=True).start()
    while True:
        kind = recv_exact(sock, 1)
        (length,) = struct.unpack(">I", recv_exact(sock, 4))
        data = recv_exact(sock, length)
        if kind in (b"O", b"E"):
            write_all(1 if kind == b"O" else 2, data)
        elif kind == b"X":
            code = int(data)
            os._exit(128 - code if code < 0 else code)
        else:
            fail(f"unknown frame {kind!r}")


main()
