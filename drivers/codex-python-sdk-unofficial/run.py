#!/usr/bin/env python3
"""Run one task with PyPI `codex-python-sdk-unofficial` 0.128.0 (module `codex_agent_sdk`).

Opt-in (not in CI): install the package into a venv (drivers/README.md), then run this script
with that venv's interpreter. The SDK is used through its public one-shot helper, unmodified:

    async for event in query(prompt=P, options=CodexOptions(...), app_server=AppServerConfig(...)):

`query` launches `<codex> app-server`, sends `initialize` WITHOUT `experimentalApi` (the SDK's
default), starts an ephemeral thread and one turn, and streams the turn's events.

Task envelope (`--task`, drivers/sdk_task.py): `approvals` never -> approval policy `never`;
user-accept / user-decline -> an approval handler that accepts / declines; user-default -> no
handler (the SDK's own default).
Exit status: 0 when the turn completed, 1 when it did not or the SDK raised, 2 for a task this
driver cannot run, 124 when the run's bound expired.
"""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sdk_task import read_task  # noqa: E402

DRIVER = "codex-python-sdk-unofficial"


async def one_turn(args, task, sandbox, approvals):
    from codex_agent_sdk import AppServerConfig, ApprovalDecision, CodexOptions, query
    from codex_agent_sdk.events import AgentTextDeltaEvent, TurnCompletedEvent

    handler = None
    if approvals in ("user-accept", "user-decline"):
        decision = ApprovalDecision.accept() if approvals == "user-accept" else ApprovalDecision.decline()

        async def handler(_request):
            return decision

    options = CodexOptions(
        cwd=args.workspace,
        sandbox_mode=sandbox,
        approval_policy="never" if approvals == "never" else "on-request",
    )
    app_server = AppServerConfig(codex_bin=args.codex, cwd=args.workspace)
    text, status = [], None
    async for event in query(prompt=task["prompt"], options=options, app_server=app_server, approval_handler=handler):
        if isinstance(event, AgentTextDeltaEvent):
            text.append(event.text_delta)
        elif isinstance(event, TurnCompletedEvent):
            status = event.turn_status
    return status, "".join(text)


def main():
    args, task, sandbox, approvals, bound = read_task(DRIVER)
    try:
        status, text = asyncio.run(asyncio.wait_for(one_turn(args, task, sandbox, approvals), bound))
    except asyncio.TimeoutError:
        print(f"{DRIVER} driver: the run did not end within {bound:.0f} s", file=sys.stderr)
        return 124
    except Exception as e:  # the SDK raises its own CodexError family and pydantic's errors
        print(f"{DRIVER} driver: the run failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"status": status, "final_response": text}))
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
