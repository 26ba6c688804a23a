#!/usr/bin/env python3
"""Writes one copy of driver.mjs per realistic bug, and a drivers file declaring them all, into
OUT (issue 37's held-out measurement: each copy must turn the protocol profile red).
Usage: python3 bugs.py OUT; then `harness run --drivers OUT/drivers.toml --app-server fake`."""
import pathlib, sys

# name -> (what a real driver gets wrong, then pairs: a text replaced, its replacement)
BUGS = {
    "planning-writable": ("a planning task runs with write access",
        'planning: "read-only"', 'planning: "workspace-write"'),
    "cwd-ignored": ("the thread runs in the driver's own folder, not the task's workspace",
        "cwd: workspace,", "cwd: process.cwd(),"),
    "never-ignored": ("approvals `never` still let Codex ask",
        'never: { approvalPolicy: "never"', 'never: { approvalPolicy: "on-request"'),
    "grants-refused": ("every approval is granted, whatever the user said",
        "policy.grant ? yes : no", "yes"),
    "wrong-request-id": ("a server request is answered with the id of the driver's last request",
        "const { id, method } = message;", "const { method } = message;\n  const id = nextId - 1;"),
    "stderr-not-drained": ("codex's stderr is a pipe nobody reads",
        'codex.stderr.on("data", (chunk) => {', 'codex.stderr.on("never", (chunk) => {'),
    "foreign-turn": ("any turn/completed ends the driver's turn",
        "if (earlyCompletions.has(turnId)) return finish(() => resolve(earlyCompletions.get(turnId)));",
        "if (earlyCompletions.size) return finish(() => resolve([...earlyCompletions.values()][0]));"),
    "exit0-failed-turn": ("exits 0 whatever the turn's status",
        'return turn.status === "completed" ? 0 : 1;', "return 0;"),
    "close-on-message": ("the agent's message is taken for the turn's end: stdin is closed before turn/completed",
        'process.stdout.write(`${message.params.item.text ?? ""}\\n`);',
        'process.stdout.write(`${message.params.item.text ?? ""}\\n`);\n'
        '    earlyCompletions.set(message.params.turnId, { id: message.params.turnId, status: "completed" });'),
    "drops-early-completion": ("a turn/completed that arrives before the turn/start answer is dropped",
        "earlyCompletions.set(turn.id, turn);", "if (pending.size === 0) earlyCompletions.set(turn.id, turn);"),
    "unknown-request-unanswered": ("a server request it does not know is left unanswered",
        "return send({ id, error: { code: -32601, message: `${method} is not handled by this client` } });",
        "if (!method.startsWith(\"item/\")) return;\n      return send({ id, error: { code: -32601, message: \"no\" } });"),
    "retry-error-terminal": ("every `error` notification fails the turn, willRetry or not",
        "earlyCompletions.set(turn.id, turn);",
        "if (earlyCompletions.get(turn.id)?.status !== \"failed\") earlyCompletions.set(turn.id, turn);",
        '} else if (message.method === "item/completed"',
        '} else if (message.method === "error") {\n'
        '    earlyCompletions.set(message.params.turnId, { id: message.params.turnId, status: "failed" });\n'
        '  } else if (message.method === "item/completed"'),
    "line-64k": ("lines longer than 64 KiB fail the run (a fixed read buffer, undeclared)",
        "lastMessageAt = Date.now();\n  let message;",
        "lastMessageAt = Date.now();\n  if (line.length > 65536) return abort(new Error(\"line too long\"));\n  let message;"),
    "env-forwarded": ("the driver's whole environment goes to codex",
        "env: childEnv,", "env: process.env,"),
    "model-ignored": ("the task's model is never sent",
        "if (model) threadParams.model = model;", ""),
    "approval-boolean": ("an approval is answered with a boolean instead of a decision",
        "send({ id, result: { decision: policy.grant ? yes : no } })",
        "send({ id, result: { approved: policy.grant } })"),
    "no-initialized": ("the initialized notification is never sent",
        'send({ method: "initialized" });', ""),
    "no-request-bound": ("a request waits for its answer forever",
        "const timer = setTimeout(() => {", "const timer = setTimeout(() => {}, 0);\n    const unused = (() => {"),
}


def main(out):
    source = (pathlib.Path(__file__).parent / "driver.mjs").read_text()
    out = pathlib.Path(out)
    declarations = []
    for name, (about, *edits) in BUGS.items():
        copy = source
        for old, new in zip(edits[::2], edits[1::2]):
            if copy.count(old) != 1:
                sys.exit(f"bug {name}: the text to replace occurs {copy.count(old)} times in driver.mjs")
            copy = copy.replace(old, new)
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "driver.mjs").write_text(copy)
        declarations.append(
            f'[drivers.bug-{name}]\nabout = "{about}"\n'
            f'command = "node {name}/driver.mjs --task {{task}} --cwd {{workspace}} --prompt {{prompt}} --model {{model}}"\n'
            'codex = "env:CODEX_BIN"\ncontract = "wire"\nmodes = ["planning", "standard"]\n'
            'approvals = ["auto-review", "never", "user-accept", "user-decline", "user-default"]\n'
            'outcome = "exit-status"\n')
    (out / "drivers.toml").write_text("\n".join(declarations))


if __name__ == "__main__":
    main(sys.argv[1])
