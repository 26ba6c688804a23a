#!/usr/bin/env python3
"""Run one task with PyPI `codex-app-server-client` 0.1.0 (a community SDK of `codex app-server`).

Opt-in (not in CI): install the package into a venv (drivers/README.md), then run this script
with that venv's interpreter. The SDK is used through its public API, unmodified:

    with SyncCodexAppServer(codex_bin=CODEX) as server:
        server.start_thread(ThreadStartParams(...)).run(PROMPT).final_response

It launches `<codex> app-server --listen stdio://`, sends `initialize` with
`experimentalApi: true`, `initialized`, `thread/start` and one `turn/start`; it ends the
app-server by closing stdin and sending SIGTERM. Its default answer to any `*/requestApproval`
is `decline`, to any other server request a JSON-RPC error -32601; `user-accept` registers
handlers that accept commands and file changes.

Task envelope (`--task`, drivers/sdk_task.py): `approvals` never -> approval policy `never`;
user-accept -> accept handlers; user-decline and user-default -> the SDK's default (decline).
Exit status: 0 when the turn completed, 1 when it did not or the SDK raised, 2 for a task this
driver cannot run, 124 when the run's bound expired.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sdk_task import arm_bound, read_task  # noqa: E402

DRIVER = "codex-app-server-client"
APPROVAL_REQUESTS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")


def main():
    args, task, sandbox, approvals, bound = read_task(DRIVER)
    from codex_app_server_client import SyncCodexAppServer
    from codex_app_server_client.types.threads import ThreadStartParams

    arm_bound(DRIVER, bound)
    try:
        with SyncCodexAppServer(codex_bin=args.codex) as server:
            if approvals == "user-accept":
                for method in APPROVAL_REQUESTS:
                    server.low_level.on_server_request(method, lambda _m, _p: {"decision": "accept"})
            thread = server.start_thread(
                ThreadStartParams(
                    cwd=args.workspace,
                    sandbox=sandbox,
                    approval_policy="never" if approvals == "never" else "on-request",
                )
            )
            result = thread.run(task["prompt"], timeout_s=bound)
    except Exception as e:  # the SDK raises TimeoutError, RuntimeError and pydantic's errors
        print(f"{DRIVER} driver: the run failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"thread": thread.id, "status": result.status, "final_response": result.final_response}))
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
