"""What the SDK adapters under drivers/ share: their command line and the task envelope it names;
for the community SDKs (drivers/community.toml) also the task as they all read it and the run's
bound."""

import argparse
import json
import os
import sys
import threading

SANDBOX_BY_MODE = {"standard": "workspace-write", "planning": "read-only"}
APPROVALS = ("never", "user-accept", "user-decline", "user-default")


def refuse(driver, message):
    print(f"{driver} driver: cannot run this task: {message}", file=sys.stderr)
    sys.exit(2)


def read_envelope(driver, description=None):
    """The command line (`--task`, `--codex`, `--workspace`) and the task envelope it names;
    exits 2 when the envelope cannot be read or has no prompt."""
    parser = argparse.ArgumentParser(prog=driver, description=description)
    parser.add_argument("--task", required=True, help="the task envelope (JSON)")
    parser.add_argument("--codex", required=True, help="the program to launch as codex")
    parser.add_argument("--workspace", required=True, help="the thread's cwd")
    args = parser.parse_args()
    try:
        with open(args.task, encoding="utf-8") as f:
            task = json.load(f)
    except (OSError, ValueError) as e:
        refuse(driver, f"reading the task envelope {args.task}: {e}")
    if not isinstance(task, dict) or not isinstance(task.get("prompt"), str):
        refuse(driver, "the task envelope has no prompt")
    return args, task


def read_task(driver):
    """(args, task, sandbox, approvals, bound in seconds); exits 2 for a task `driver` cannot run."""
    args, task = read_envelope(driver)
    if task.get("relaunch") or task.get("answers") or task.get("plan_reviews"):
        refuse(driver, "relaunch, answers and plan reviews are not supported")
    sandbox = SANDBOX_BY_MODE.get(task.get("mode"))
    if sandbox is None:
        refuse(driver, f"mode `{task.get('mode')}` (it runs standard and planning)")
    approvals = task.get("approvals", "user-default")
    if approvals not in APPROVALS:
        refuse(driver, f"approvals `{approvals}` (it can do {', '.join(APPROVALS)})")
    timeouts = task.get("timeouts") or {}
    # Start-up and shutdown requests plus one turn.
    bound = (4 * timeouts.get("request_ms", 30_000) + timeouts.get("turn_total_ms", 180_000)) / 1000
    return args, task, sandbox, approvals, bound


def arm_bound(driver, seconds):
    """Ends the process with 124 after `seconds`: its exit closes the app-server's stdin."""

    def expire():
        print(f"{driver} driver: the run did not end within {seconds:.0f} s", file=sys.stderr)
        sys.stderr.flush()
        os._exit(124)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
