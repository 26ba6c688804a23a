#!/usr/bin/env python3
"""Run one task with the official Python SDK of `codex app-server` (PyPI `openai-codex`).

Run it with the interpreter of the venv `harness provision` made (the SDK is not on the system
Python). The SDK is used as its documentation shows, unmodified:

    with Codex(CodexConfig(codex_bin=CODEX, cwd=WORKSPACE)) as codex:
        codex.thread_start(sandbox=..., approval_mode=...).run(PROMPT).final_response

`--codex` is the program the SDK launches (`<codex> app-server --listen stdio://`): in a cell,
the harness's tap. The task envelope (`--task`, docs/driver-contract.md) gives the prompt, the
mode and the bounds; its optional `approvals` says how escalations are handled:

  auto-review  (default: the SDK's own default, `ApprovalMode.auto_review`) Codex's automatic
               reviewer decides; the SDK is sent no approval request.
  never        `ApprovalMode.deny_all`: approval policy `never`, nothing can escalate.
  user-accept  the reviewer is the user, so Codex asks the SDK, and the SDK's built-in default
               approval handler answers (it accepts every command and file change). The public
               API has no such mode; this starts the thread through the SDK's own client with
               `approvalsReviewer: "user"` and leaves the SDK's handler in place.
  user-default the same: nobody tells the SDK how to answer, so its built-in default handler
               does (the case grades whether a driver's default refuses an escape from a
               read-only run; the SDK's accepts it).

`user-decline` cannot be expressed with the SDK (no public way to answer one request) and is
refused. The SDK has no plan mode: a `planning` task runs one turn with `Sandbox.read_only` (what
a read-only run grades; no plan is proposed, so an `approve` review has nothing to act on and a
`revise` review is refused), `standard` with `Sandbox.workspace_write`; `ask` is refused.

Exit status: 0 when every turn completed, 1 when a turn failed or the SDK raised, 2 for a task
this driver cannot run, 124 when the run's bound expired (the app-server is killed first).
"""

import json
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sdk_task import read_envelope  # noqa: E402

# Bounds used when the envelope has none (milliseconds), as the harness's real-Codex bounds.
DEFAULT_REQUEST_MS = 30_000
DEFAULT_TURN_TOTAL_MS = 180_000


def fail_task(message):
    print(f"python-sdk driver: cannot run this task: {message}", file=sys.stderr)
    sys.exit(2)


def run_bound_seconds(task):
    timeouts = task.get("timeouts") or {}
    request = timeouts.get("request_ms", DEFAULT_REQUEST_MS)
    turn = timeouts.get("turn_total_ms", DEFAULT_TURN_TOTAL_MS)
    # Start-up (initialize, thread/start) plus one turn plus shutdown.
    return (4 * request + turn) / 1000.0


def descendants(pid):
    """Every process below `pid` (Linux /proc): what the SDK started, whatever it is doing."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                # The command name may hold spaces: the fields after its closing parenthesis.
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def start_watchdog(seconds):
    def expire():
        print(
            f"python-sdk driver: the run did not end within {seconds:.0f} s; killing the app-server",
            file=sys.stderr,
        )
        # The SDK may still be inside its constructor (no handle on its child yet), so the
        # children are found from /proc rather than from the SDK's objects.
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        sys.stderr.flush()
        os._exit(124)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def start_thread(codex, sandbox, approvals, workspace):
    from openai_codex import ApprovalMode

    if approvals == "auto-review":
        return codex.thread_start(
            cwd=workspace, sandbox=sandbox, approval_mode=ApprovalMode.auto_review
        )
    if approvals == "never":
        return codex.thread_start(
            cwd=workspace, sandbox=sandbox, approval_mode=ApprovalMode.deny_all
        )
    # user-accept / user-default: the SDK's own client and its built-in approval handler.
    from openai_codex.api import Thread
    from openai_codex._sandbox import _sandbox_mode
    from openai_codex.generated.v2_all import (
        ApprovalsReviewer,
        AskForApproval,
        AskForApprovalValue,
        ThreadStartParams,
    )

    params = ThreadStartParams(
        approval_policy=AskForApproval(root=AskForApprovalValue.on_request),
        approvals_reviewer=ApprovalsReviewer.user,
        cwd=workspace,
        sandbox=_sandbox_mode(sandbox),
    )
    started = codex._client.thread_start(params)
    return Thread(codex._client, started.thread.id)


def main():
    args, task = read_envelope("python-sdk", __doc__.split("\n\n")[0])
    if task.get("relaunch"):
        fail_task("the SDK driver cannot relaunch and resume a saved thread")
    if any(r.get("decision") == "revise" for r in task.get("plan_reviews") or []):
        fail_task("the SDK driver cannot review plans (it has no plan mode)")
    if task.get("answers"):
        fail_task("the SDK driver cannot answer the model's questions")

    try:
        from openai_codex import Codex, CodexConfig, Sandbox, __version__
    except ImportError as e:
        fail_task(f"the openai-codex package is not importable ({e}); run `harness provision`")

    mode = task.get("mode")
    if mode == "planning":
        sandbox = Sandbox.read_only
    elif mode == "standard":
        sandbox = Sandbox.workspace_write
    else:
        fail_task(f"mode `{mode}` (the SDK driver runs `standard` and `planning`)")
    approvals = task.get("approvals", "auto-review")
    if approvals not in ("auto-review", "never", "user-accept", "user-default"):
        fail_task(
            f"approvals `{approvals}` (the SDK can do auto-review, never, user-accept, user-default; "
            "it has no public way to decline one request)"
        )
    if not os.path.isfile(args.codex):
        fail_task(f"--codex {args.codex} does not exist")

    start_watchdog(run_bound_seconds(task))
    print(
        f"python-sdk driver: openai-codex {__version__}, sandbox {sandbox.value}, approvals {approvals}",
        file=sys.stderr,
    )
    try:
        codex = Codex(CodexConfig(codex_bin=args.codex, cwd=args.workspace))
    except Exception as e:  # the SDK raises its own error types and plain RuntimeErrors
        print(f"python-sdk driver: start-up failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    with codex:
        try:
            thread = start_thread(codex, sandbox, approvals, args.workspace)
            result = thread.run(task["prompt"])
        except Exception as e:
            print(f"python-sdk driver: the run failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    print(
        json.dumps(
            {
                "thread": thread.id,
                "turn": result.id,
                "status": result.status.value,
                "final_response": result.final_response,
            }
        )
    )
    return 0 if result.status.value == "completed" else 1


if __name__ == "__main__":
    status = main()
    # The SDK has closed its app-server by now (`with codex:`); what is left is the interpreter
    # tearing down the SDK's generated models, 0.1-0.2 s of every run that nobody waits for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
