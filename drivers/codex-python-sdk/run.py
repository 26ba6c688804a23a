#!/usr/bin/env python3
"""Run one task with PyPI `codex-python-sdk` 0.2.1 (a community SDK of `codex app-server`).

Opt-in (not in CI): install the package into a venv (drivers/README.md), then run this script
with that venv's interpreter. The SDK is used through its public API, unmodified:

    with create_client(codex_command=CODEX, process_cwd=WORKSPACE, ...) as client:
        client.responses_create(prompt=PROMPT, thread_params={...}).text

It launches `<codex> app-server --enable guardian_approval -c web_search="live"` (its defaults),
sends `initialize` with `experimentalApi: true`, then `thread/start` (approval policy
`on-request` unless told otherwise) and one `turn/start`. Its default answer to a command or
file-change approval is `decline`; `user-accept` installs handlers that accept.

Task envelope (`--task`, drivers/sdk_task.py): `approvals` never -> approval policy `never`;
user-accept -> accept handlers; user-decline and user-default -> the SDK's default (decline).
Exit status: 0 when the turn completed, 1 when it failed or the SDK raised, 2 for a task this
driver cannot run, 124 when the run's bound expired.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sdk_task import arm_bound, read_task  # noqa: E402

DRIVER = "codex-python-sdk"


def main():
    args, task, sandbox, approvals, bound = read_task(DRIVER)
    from codex_python_sdk import create_client

    accept = (lambda _params: {"decision": "accept"}) if approvals == "user-accept" else None
    thread_params = {"cwd": args.workspace, "sandbox": sandbox}
    if approvals == "never":
        thread_params["approvalPolicy"] = "never"
    arm_bound(DRIVER, bound)
    try:
        with create_client(
            codex_command=args.codex,
            process_cwd=args.workspace,
            on_command_approval=accept,
            on_file_change_approval=accept,
        ) as client:
            response = client.responses_create(prompt=task["prompt"], thread_params=thread_params)
    except Exception as e:  # the SDK raises its own error types and plain RuntimeErrors
        print(f"{DRIVER} driver: the run failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"thread": response.thread_id, "final_response": response.text}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
