#!/usr/bin/env python3
"""A stdio MCP server with one tool, `ask_user`, whose call asks the user through the client.

Why it exists: the real Codex sends its driver `mcpServer/elicitation/request` only when an MCP
server it runs sends it MCP `elicitation/create`. The harness writes this file into a real-Codex
cell's CODEX_HOME and names it in `mcp_servers`; the mock model API then calls the tool.

Why Python and the standard library only: Codex starts the server itself, inside whatever view
the cell gives the app-server (its own uid, a container), so it must be one readable file with
no build and nothing to install; python3 is on every machine the real-Codex cells run on.

Messages (MCP, JSON-RPC 2.0, one JSON object per line on stdin/stdout): `initialize`,
`notifications/initialized`, `tools/list`, `tools/call` (which sends `elicitation/create` and
waits for its answer), `ping`. Anything else asked is answered with "method not found".
The tool's result says what the client answered: `ELICITATION_ACCEPT`, `ELICITATION_DECLINE`,
`ELICITATION_CANCEL` (followed by the answer's JSON) or `ELICITATION_ERROR` (a JSON-RPC error).
"""

import json
import os
import select
import sys

TOOL = "ask_user"
# Every wait is bounded: with no message for this long, the server exits (Codex closes stdin
# when it ends, so this only matters if Codex hangs).
IDLE_SECONDS = 300
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
QUESTION = {
    "message": "Is the ticket still open?",
    "requestedSchema": {
        "type": "object",
        "properties": {"open": {"type": "boolean", "title": "Open"}},
        "required": ["open"],
    },
}

_pending = b""


def read_message():
    """The next JSON object on stdin, or None at end of input or after IDLE_SECONDS of silence."""
    global _pending
    fd = sys.stdin.fileno()
    while b"\n" not in _pending:
        ready, _, _ = select.select([fd], [], [], IDLE_SECONDS)
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        _pending += chunk
    line, _pending = _pending.split(b"\n", 1)
    if not line.strip():
        return read_message()
    try:
        return json.loads(line)
    except ValueError:
        return {}


def send(message):
    message["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer_of(result):
    """The tool's text and whether it is an error, from the elicitation's answer."""
    if "error" in result:
        return "ELICITATION_ERROR " + json.dumps(result["error"]), True
    outcome = result.get("result") or {}
    action = str(outcome.get("action", "missing")).upper()
    return "ELICITATION_" + action + " " + json.dumps(outcome), False


def call_tool(request, queued):
    """Ask the client, wait for its answer (handling what else it sends meanwhile), reply."""
    elicitation_id = "elicit-" + str(request.get("id"))
    send({"id": elicitation_id, "method": "elicitation/create", "params": QUESTION})
    while True:
        message = read_message()
        if message is None:
            return False
        if message.get("id") == elicitation_id and "method" not in message:
            text, is_error = answer_of(message)
            send(
                {
                    "id": request.get("id"),
                    "result": {"content": [{"type": "text", "text": text}], "isError": is_error},
                }
            )
            return True
        queued.append(message)


def handle(message, queued):
    method = message.get("method")
    if "id" not in message or method is None:
        return True
    if method == "initialize":
        asked = (message.get("params") or {}).get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "harness-elicit", "version": "1.0.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": TOOL,
                    "description": "Ask the user whether the ticket is still open.",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    elif method == "tools/call":
        name = (message.get("params") or {}).get("name")
        if name == TOOL:
            return call_tool(message, queued)
        send({"id": message["id"], "error": {"code": -32602, "message": "unknown tool"}})
        return True
    else:
        send({"id": message["id"], "error": {"code": -32601, "message": "method not found"}})
        return True
    send({"id": message["id"], "result": result})
    return True


def main():
    queued = []
    while True:
        message = queued.pop(0) if queued else read_message()
        if message is None or not handle(message, queued):
            return


if __name__ == "__main__":
    main()
