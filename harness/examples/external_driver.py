#!/usr/bin/env python3
"""An example external driver for `harness run --driver-cmd` (python3 standard library only).

It follows docs/driver-contract.md: it reads the task envelope named by HARNESS_TASK, launches
the app-server command of HARNESS_APP_SERVER_CMD with its own launch policy, speaks JSON-RPC to
it over stdio, and writes its run events (JSONL, the graders' event contract) to HARNESS_EVENTS,
ending with `run.ended`. Every wait is bounded by the `timeouts` of the envelope (the harness's
own bounds). A transient start-up failure gets a bounded number of fresh attempts in the same run,
like the reference driver. It is deliberately small: no relaunch / resume (a task asking for one is
refused).
"""

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

MAX_LINE = 4 * 1024 * 1024  # declared for it as suites::spec::HARNESS_OWN_MAX_LINE_BYTES
READ_ONLY = "example-workspace-read-only"
WORKSPACE = "example-workspace"
EXTERNAL = "example-external-sandbox"


class TransportLost(Exception):
    pass


class Closed(TransportLost):
    """The app-server went away (its output ended, or its stdin broke)."""


class TimedOut(Exception):
    pass


class Rejected(Exception):
    """A definite start-up refusal: end the run at once, never retry in the same run."""


class Transient(Exception):
    """A start-up failure a fresh app-server may not repeat."""


# Errors that are permission, authentication or invalid-request failures (the reference
# driver's rule, harness/src/driver/session.rs).
DEFINITE_MARKERS = ("permission", "not permitted", "unauthorized", "authenticat", "authoriz",
                    "forbidden", "invalid request", "401", "403")
INVALID_REQUEST = -32600


def is_definite(external, error):
    """Any start-up error inside an external sandbox, or a permission/auth/invalid-request one."""
    if external or error.get("code") == INVALID_REQUEST:
        return True
    message = str(error.get("message") or "").lower()
    return any(marker in message for marker in DEFINITE_MARKERS)


class Bounds:
    """The harness's wait bounds, from the envelope's `timeouts` (milliseconds)."""

    def __init__(self, timeouts):
        if not isinstance(timeouts, dict):
            # An envelope from a harness without `timeouts`: one bound for every wait.
            fallback = float(os.environ.get("HARNESS_TIMEOUT_SECS", "10")) * 1000
            timeouts = {"request_ms": fallback, "turn_idle_ms": fallback, "turn_total_ms": fallback * 6,
                        "shutdown_ms": fallback, "startup_attempts": 3}
        self.request = timeouts["request_ms"] / 1000.0
        self.turn_idle = timeouts["turn_idle_ms"] / 1000.0
        self.turn_total = timeouts["turn_total_ms"] / 1000.0
        self.shutdown = timeouts["shutdown_ms"] / 1000.0
        self.startup_attempts = max(1, int(timeouts["startup_attempts"]))


class Events:
    def __init__(self, path):
        self.out = open(path, "w", encoding="utf-8")
        self.exit_status = 1

    def emit(self, kind, payload):
        self.out.write(json.dumps({"kind": kind, "payload": payload}) + "\n")
        self.out.flush()

    def end(self, ending, retry=False, code=None, reason=None):
        self.emit("run.ended", {"ending": ending, "retry_offered": retry, "error_code": code, "reason": reason})
        # Like any command-line driver, the exit status says whether the run succeeded: the
        # harness reads the terminal from the wire and from how this process ended.
        self.exit_status = 0 if ending == "succeeded" else 1


def profile_rules(mode, external, network, policy, install_dir):
    """The launch policy: (profile name, inline TOML rules)."""
    net = "true" if network else "false"
    narrow = '":root"="none",":minimal"="read"'
    if install_dir:
        narrow += "," + json.dumps(install_dir) + '="read"'
    if mode == "planning":
        if external and policy == "current":
            return READ_ONLY, '{filesystem={":root"="read"},network={enabled=%s}}' % net
        return READ_ONLY, '{filesystem={%s,":workspace_roots"={"."="read"}},network={enabled=%s}}' % (narrow, net)
    if external:
        return EXTERNAL, '{filesystem={":root"="write"},network={enabled=%s}}' % net
    return WORKSPACE, '{filesystem={%s,":workspace_roots"={"."="write"}},network={enabled=%s}}' % (narrow, net)


class Client:
    """Newline-delimited JSON-RPC over the child's stdio; every wait is bounded."""

    def __init__(self, cmd, env, cwd, bounds):
        try:
            self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=sys.stderr, start_new_session=True)
        except OSError as e:
            raise Transient("could not start the app-server: %s" % e)
        self.inbox = queue.Queue(maxsize=10000)
        self.kept = []
        self.next_id = 1
        self.bounds = bounds
        self.last_bytes = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        # Read chunks, not lines: a long line still streaming in is not silence, so every chunk
        # marks when bytes last came (see receive); the line bound keeps that wait bounded.
        pending = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                self.inbox.put(Closed("the app-server closed its output (%s)" % self._exit_status()))
                return
            self.last_bytes = time.monotonic()
            if b"\n" not in chunk:
                pending += chunk
                if len(pending) > MAX_LINE:
                    self.inbox.put(TransportLost("the app-server sent a line longer than %d bytes" % MAX_LINE))
                    return
                continue
            *lines, pending = (pending + chunk).split(b"\n")
            if any(len(line) > MAX_LINE for line in lines) or len(pending) > MAX_LINE:
                self.inbox.put(TransportLost("the app-server sent a line longer than %d bytes" % MAX_LINE))
                return
            for line in lines:
                if not self._deliver(line):
                    return

    def _deliver(self, line):
        """Queue one line's message; False once the transport is lost."""
        if not line.strip():
            return True
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict):
                raise ValueError("not an object")
        except ValueError as e:
            self.inbox.put(TransportLost("the app-server sent a malformed line (%s)" % e))
            return False
        self.inbox.put(msg)
        return True

    def _exit_status(self):
        """The exit status once the process has exited: end of output comes first, so poll()
        right away would often still say None. The wait is bounded like every other."""
        try:
            code = self.proc.wait(timeout=self.bounds.shutdown)
        except subprocess.TimeoutExpired:
            return "still running %.1f s after closing its output" % self.bounds.shutdown
        if code < 0:
            return "killed by signal %d" % -code
        return "exit %d" % code

    def send(self, msg):
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as e:
            raise Closed("writing to the app-server failed: %s" % e)

    def receive(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
                break
            except queue.Empty:
                # Silence is no bytes at all: a line still arriving renews the wait.
                if self.last_bytes + timeout > deadline:
                    deadline = self.last_bytes + timeout
                    continue
                raise TimedOut("no message from the app-server within %.1fs" % timeout)
        if isinstance(item, Exception):
            self.inbox.put(item)
            raise item
        return item

    def next(self, timeout):
        return self.kept.pop(0) if self.kept else self.receive(timeout)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + self.bounds.request
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimedOut("no response to `%s` within %.1fs" % (method, self.bounds.request))
            msg = self.receive(remaining)
            # Server requests carry their own ids: a message with a `method` is never a response.
            if "method" not in msg and msg.get("id") == rid:
                return msg
            self.kept.append(msg)

    def close(self):
        """Close stdin and wait (bounded) for the exit; kill the process group if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=self.bounds.shutdown)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        """Kill the app-server's whole process group at once (after a transport fault)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def valid_result(tool, args):
    if not isinstance(args, dict):
        return False
    if tool == "paperclip_finish":
        return args.get("status") in ("done", "blocked") and isinstance(args.get("summary"), str) and args["summary"] != ""
    if tool == "paperclip_block":
        return isinstance(args.get("owner"), str) and args["owner"] != "" and isinstance(args.get("action"), str) and args["action"] != ""
    return False


def to_result(tool, args):
    if tool == "paperclip_block":
        return {"outcome": "blocked", "summary": args.get("summary") or args["action"], "owner": args["owner"], "action": args["action"]}
    return {"outcome": "done" if args["status"] == "done" else "blocked", "summary": args["summary"], "owner": None, "action": None}


def reduce_item(item, profile):
    kind = item.get("type")
    if kind == "commandExecution":
        out = item.get("aggregatedOutput")
        return {"type": "command-execution", "id": item.get("id", ""), "command": item.get("command", ""),
                "cwd": item.get("cwd"), "status": item.get("status", ""), "exit_code": item.get("exitCode"),
                "stdout": None, "stderr": None, "aggregated_output": out[:4000] if isinstance(out, str) else None,
                "sandbox": profile}
    if kind == "plan":
        return {"type": "plan", "id": item.get("id", ""), "text": item.get("text", "")}
    if kind == "agentMessage":
        return {"type": "agent-message", "id": item.get("id", ""), "text": item.get("text", "")}
    return {"type": "other", "id": item.get("id", ""), "item_type": kind or ""}


def run_turn(client, ev, state, text, params):
    ev.emit("turn.submitted", {"index": state["turns"], "permissions": params.get("permissions"),
                               "collaboration_mode": (params.get("collaborationMode") or {}).get("mode"),
                               "input_excerpt": text[:500]})
    state["turns"] += 1
    resp = client.request("turn/start", dict(params, threadId=state["thread"], input=[{"type": "text", "text": text}]))
    if "error" in resp:
        raise RuntimeError(resp["error"].get("message", "turn/start failed"))
    turn_id = resp["result"]["turn"]["id"]
    outcome = {"plan": None, "result": None, "status": None, "error": None}
    deadline = time.monotonic() + client.bounds.turn_total
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimedOut("turn %s did not complete within %.1fs" % (turn_id, client.bounds.turn_total))
        msg = client.next(min(client.bounds.turn_idle, remaining))
        method, p = msg.get("method"), msg.get("params") or {}
        if method is None:
            continue
        if "id" in msg:  # a server request
            if method == "item/tool/call":
                tool, args = p.get("tool"), p.get("arguments")
                if p.get("threadId") != state["thread"] or p.get("turnId") != turn_id:
                    client.send({"id": msg["id"], "error": {"code": -32600, "message": "tool call bound to another thread or turn"}})
                    raise TransportLost("protocol violation: tool call bound to another thread or turn")
                ok = valid_result(tool, args)
                if ok and state["accepted"] is None:
                    state["accepted"] = (tool, args)
                    outcome["result"] = to_result(tool, args)
                    ev.emit("result.proposed", outcome["result"])
                elif ok and state["accepted"] != (tool, args):
                    ok = False
                text_out = "%s acknowledged" % tool if ok else "rejected: invalid or conflicting result"
                client.send({"id": msg["id"], "result": {"contentItems": [{"type": "inputText", "text": text_out}], "success": ok}})
            elif method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval"):
                rid = str(msg["id"])
                ev.emit("approval.requested", {"request_id": rid, "kind": "command" if "command" in method else "file-change",
                                               "item_id": p.get("itemId"), "command": p.get("command"), "reason": p.get("reason")})
                client.send({"id": msg["id"], "result": {"decision": "decline"}})
                ev.emit("approval.resolved", {"request_id": rid, "decision": "decline"})
            else:
                client.send({"id": msg["id"], "error": {"code": -32601, "message": "unsupported: " + method}})
            continue
        if method == "turn/started" and p.get("turn", {}).get("id") == turn_id:
            ev.emit("turn.started", {"turn_id": turn_id})
        elif method in ("item/started", "item/completed"):
            item = reduce_item(p.get("item") or {}, params.get("permissions"))
            if method == "item/completed" and item["type"] == "plan":
                outcome["plan"] = item
            ev.emit("item.started" if method == "item/started" else "item.completed", {"turn_id": p.get("turnId"), "item": item})
        elif method == "turn/completed" and p.get("turn", {}).get("id") == turn_id:
            turn = p["turn"]
            err = turn.get("error")
            outcome["status"] = turn.get("status")
            outcome["error"] = err.get("message") if isinstance(err, dict) else err
            ev.emit("turn.completed", {"turn_id": turn_id, "status": outcome["status"], "error": outcome["error"]})
            return outcome


TOOLS = [{"type": "function", "name": "paperclip_finish", "description": "Report the task finished.",
          "inputSchema": {"type": "object", "properties": {"status": {"type": "string", "enum": ["done", "blocked"]},
                          "summary": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}},
                          "required": ["status", "summary"], "additionalProperties": False}},
         {"type": "function", "name": "paperclip_block", "description": "Report who must act and what they must do.",
          "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}, "action": {"type": "string"},
                          "summary": {"type": "string"}}, "required": ["owner", "action"], "additionalProperties": False}}]


def open_session(launch, ev, attempt):
    """One attempt with a fresh app-server: initialize, initialized, thread/start.

    Returns (client, thread/start result); raises Rejected, Transient, TimedOut or TransportLost.
    A failed attempt's app-server is killed before the exception leaves.
    """
    client = Client(launch["cmd"], launch["env"], launch["workspace"], launch["bounds"])
    try:
        init = client.request("initialize", {"clientInfo": {"name": "example-external-driver", "version": "0.1.0"},
                                             "capabilities": {"experimentalApi": True}})
        if "error" in init:
            raise (Rejected if is_definite(launch["external"], init["error"]) else Transient)(
                init["error"].get("message", "initialize failed"))
        client.send({"method": "initialized"})
        ev.emit("session.open-requested", {"permissions": launch["profile"], "cwd": launch["workspace"], "experimental_api": True})
        resp = client.request("thread/start", {"cwd": launch["workspace"], "permissions": launch["profile"],
                                               "approvalPolicy": "on-request", "dynamicTools": TOOLS})
        if "error" in resp:
            error = resp["error"]
            ev.emit("session.rejected", {"code": error.get("code", 0), "message": error.get("message", ""), "attempt": attempt})
            raise (Rejected if is_definite(launch["external"], error) else Transient)(error.get("message", ""))
        return client, resp["result"]
    except Closed as e:
        client.kill()
        raise Transient("the app-server exited during start-up: %s" % e)
    except BaseException:
        client.kill()
        raise


def open_with_retries(launch, ev):
    """Bounded same-run retries of transient start-up failures; (client, result) or a terminal."""
    attempts = launch["bounds"].startup_attempts
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            return open_session(launch, ev, attempt), None
        except Rejected as e:
            return None, ("failed-permanently", True, "provider_startup_rejected", str(e))
        except Transient as e:
            last = str(e)
            ev.emit("diagnostic", {"level": "warn", "message": "start-up attempt %d of %d failed: %s" % (attempt, attempts, last)})
    return None, ("retries-exhausted", True, "retry_exhausted", "%d start-up attempts failed; the last: %s" % (attempts, last))


def main():
    task = json.load(open(os.environ["HARNESS_TASK"], encoding="utf-8"))
    ev = Events(os.environ["HARNESS_EVENTS"])
    try:
        run(task, ev)
    finally:
        ev.out.flush()
    sys.exit(ev.exit_status)


def run(task, ev):
    workspace = os.environ["HARNESS_WORKSPACE"]
    mode = task["mode"]
    external = os.environ.get("PAPERCLIP_RUNNER_EXTERNAL_SANDBOX") == "1"
    network = os.environ.get("PAPERCLIP_RUNNER_NETWORK_ACCESS") == "enabled"
    policy = os.environ.get("HARNESS_POLICY", "current")
    command = json.loads(os.environ["HARNESS_APP_SERVER_CMD"])
    bindir = os.path.dirname(os.path.realpath(command[0]))
    install_dir = os.path.dirname(bindir) if os.path.basename(bindir) == "bin" else bindir
    # Behind the harness's wire tap, `codex` is the tap: the harness names the real install.
    install_dir = os.environ.get("HARNESS_APP_SERVER_INSTALL_DIR") or install_dir
    profile, rules = profile_rules(mode, external, network, policy, install_dir)
    argv = ["-c", 'default_permissions="%s"' % profile, "-c", "permissions.%s=%s" % (profile, rules)]
    cmd = command + argv + json.loads(os.environ.get("HARNESS_APP_SERVER_EXTRA_ARGS", "[]"))
    suite, runner, environment, case = os.environ["HARNESS_CELL"].split(".")
    identity = hashlib.sha256(json.dumps([mode, external, workspace, profile]).encode()).hexdigest()
    ev.emit("run.started", {"cell": {"suite": suite, "runner": runner, "environment": environment, "case": case},
                            "driver": "example-external-driver",
                            "launch": {"mode": mode, "target": "external-sandbox" if external else "local",
                                       "network_enabled": network, "policy": policy, "argv": argv,
                                       "thread_permissions": profile, "turn_permissions": profile, "identity": identity}})
    if task.get("relaunch"):
        return ev.end("failed-permanently", False, "unsupported_task", "this example driver does not relaunch or resume threads")
    launch = {"cmd": cmd, "env": json.loads(os.environ["HARNESS_APP_SERVER_ENV"]), "workspace": workspace,
              "bounds": Bounds(task.get("timeouts")), "external": external, "profile": profile}
    client = None
    faulted = False
    try:
        opened, terminal = open_with_retries(launch, ev)
        if terminal:
            return ev.end(*terminal)
        client, result = opened
        state = {"thread": result["thread"]["id"], "turns": 0, "accepted": None}
        ev.emit("session.started", {"thread_id": state["thread"], "sandbox": {
            "sandbox": result.get("sandbox"), "active_profile": (result.get("activePermissionProfile") or {}).get("id"),
            "instruction_sources": result.get("instructionSources") or []}})
        model = result.get("model") or "default"
        base = {"permissions": profile}
        params = dict(base, collaborationMode={"mode": "plan", "settings": {"model": model, "reasoning_effort": None, "developer_instructions": None}}) if mode == "planning" else base
        reviews = list(task.get("plan_reviews") or [])
        text = task["prompt"]
        while state["turns"] < task.get("max_turns", 6):
            outcome = run_turn(client, ev, state, text, params)
            if outcome["status"] != "completed":
                return ev.end("failed-permanently", True, "turn_failed", outcome["error"] or outcome["status"])
            if mode == "planning" and outcome["plan"] and params.get("collaborationMode", {}).get("mode") == "plan":
                rid = "plan-%d" % state["turns"]
                ev.emit("approval.requested", {"request_id": rid, "kind": "plan", "item_id": outcome["plan"]["id"], "command": None, "reason": outcome["plan"]["text"][:500]})
                if not reviews:
                    ev.emit("result.proposed", {"outcome": "needs-review", "summary": outcome["plan"]["text"][:500], "owner": "user", "action": "review the proposed plan"})
                    return ev.end("succeeded")
                review = reviews.pop(0)
                ev.emit("approval.resolved", {"request_id": rid, "decision": "accept" if review["decision"] == "approve" else "revise"})
                state["accepted"] = None
                if review["decision"] == "approve":
                    params = dict(base, collaborationMode={"mode": "default", "settings": {"model": model, "reasoning_effort": None, "developer_instructions": None}})
                    text = task.get("follow_up_prompt") or "The plan is approved. Carry it out."
                else:
                    text = review["text"]
                continue
            if state["accepted"] is None:
                ev.emit("result.proposed", {"outcome": "needs-review", "summary": "no result reported", "owner": "user", "action": "review the run"})
            return ev.end("succeeded")
        return ev.end("failed-permanently", False, "max_turns_exceeded", "too many turns")
    except TimedOut as e:
        faulted = True
        return ev.end("timed-out", True, "timed_out", str(e))
    except TransportLost as e:
        faulted = True
        return ev.end("transport-lost", True, "transport_lost", str(e))
    except RuntimeError as e:
        return ev.end("failed-permanently", True, "turn_start_rejected", str(e))
    finally:
        if client is not None:
            # After a transport fault the app-server is not waited for: it is killed at once.
            if faulted:
                client.kill()
            else:
                client.close()


if __name__ == "__main__":
    main()
