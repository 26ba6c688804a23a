#!/usr/bin/env python3
"""A minimal Codex app-server driver, written without the harness in mind: it launches
`$CODEX_PATH app-server` with an allowlisted environment, opens a thread in --cwd, runs one
turn with --prompt (in plan mode for --mode planning), declines every approval, prints the
agent's messages, and exits 0 when its turn completed, 1 otherwise. Each `--enable FEATURE` /
`--disable FEATURE` (repeatable) is passed on to the launch, as `codex app-server --enable
FEATURE --disable FEATURE2`: Codex's own feature flags, which it refuses (exit 1) for a name that
is not one of its features."""
import argparse, json, os, queue, subprocess, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--prompt", required=True)
p.add_argument("--cwd", default=os.getcwd())
p.add_argument("--mode", default="standard", choices=["planning", "standard", "ask"])
p.add_argument("--timeout", type=float, default=30.0)
p.add_argument("--enable", action="append", default=[], metavar="FEATURE")
p.add_argument("--disable", action="append", default=[], metavar="FEATURE")
args = p.parse_args()

# An allowlisted environment: the driver's own secrets never reach the model's commands.
keep = ("PATH", "HOME", "CODEX_HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
flags = [f for name in args.enable for f in ("--enable", name)]
flags += [f for name in args.disable for f in ("--disable", name)]
proc = subprocess.Popen([os.environ.get("CODEX_PATH", "codex"), "app-server"] + flags,
                        env={k: v for k, v in os.environ.items() if k in keep},
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
inbox = queue.Queue()
threading.Thread(target=lambda: [inbox.put(l) for l in proc.stdout] + [inbox.put(None)], daemon=True).start()
next_id = 0


def send(msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()


def receive():
    line = inbox.get(timeout=args.timeout)  # queue.Empty: the app-server went quiet
    if line is None:
        raise EOFError("codex app-server closed its output")
    return json.loads(line)  # ValueError: not JSON


def request(method, params):
    global next_id
    next_id += 1
    send({"id": next_id, "method": method, "params": params})
    while True:
        msg = receive()
        if msg.get("id") == next_id and "method" not in msg:
            if "error" in msg:
                raise RuntimeError("%s failed: %s" % (method, msg["error"].get("message")))
            return msg["result"]


try:
    request("initialize", {"clientInfo": {"name": "minimal-driver", "version": "1.0"},
                           "capabilities": {"experimentalApi": True}})  # plan mode needs it
    send({"method": "initialized"})
    thread = request("thread/start", {"cwd": args.cwd})
    turn = {"threadId": thread["thread"]["id"], "input": [{"type": "text", "text": args.prompt}]}
    if args.mode == "planning":
        settings = {"model": thread.get("model") or "default", "reasoning_effort": None, "developer_instructions": None}
        turn["collaborationMode"] = {"mode": "plan", "settings": settings}
    turn_id = request("turn/start", turn)["turn"]["id"]
    while True:
        msg = receive()
        method, params = msg.get("method"), msg.get("params") or {}
        if "id" in msg and method:  # a server request: decline approvals, refuse the rest
            if method.endswith("requestApproval"):
                send({"id": msg["id"], "result": {"decision": "decline"}})
            else:
                send({"id": msg["id"], "error": {"code": -32601, "message": "unsupported"}})
        elif method == "item/completed" and params.get("item", {}).get("type") == "agentMessage":
            print(params["item"].get("text", ""))
        elif method == "turn/completed" and params["turn"].get("id") == turn_id:  # not another's
            status = params["turn"].get("status")
            print("turn", status)
            sys.exit(0 if status == "completed" else 1)
except Exception as e:  # noqa: BLE001 - any failure ends the run with a message
    print("minimal-driver: %s: %s" % (type(e).__name__, e), file=sys.stderr)
    sys.exit(1)
finally:
    try:
        proc.stdin.close()
        proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - a stuck app-server is killed
        proc.kill()
