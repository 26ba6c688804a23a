#!/usr/bin/env node
// A small Agent Client Protocol (ACP) client that runs one task with the published
// `@agentclientprotocol/codex-acp` agent, unmodified. The agent is started as
// `node <--agent>` with `CODEX_PATH=<--codex>` (in a cell: the harness's tap), so every launch
// of `codex app-server` it makes goes through the harness.
//
// The client (ACP v1, NDJSON over the agent's stdio) sends `initialize`, `session/new {cwd,
// mcpServers: []}`, `session/set_mode` when the task needs another mode than the agent's
// default, then `session/prompt`, and answers `session/request_permission` as the task says.
// The task envelope (`--task`, docs/driver-contract.md) gives the prompt, the mode, the bounds
// and, optionally, `approvals`:
//
//   auto-review   codex-acp's default `agent` mode: Codex's automatic reviewer decides
//                 (default for a `standard` task).
//   user-accept   mode `workspace-write` (`read-only` for a planning task): the reviewer is the
//                 user, and the client picks an `allow_once` option for every permission request.
//   user-decline  the same modes; the client picks a `reject_once` option (default for a
//                 `planning` task, whose `read-only` mode always asks the user).
//
// `planning` runs in codex-acp's `read-only` mode; `standard` in `agent` (or `workspace-write`);
// `ask`, `never`, plan revisions, answers and relaunches are refused (one turn, no plan mode: an
// `approve` review has no plan to act on). Written with Node's standard
// library only: the ACP wire is a few NDJSON messages, and this keeps the client runnable where
// only the agent package is installed.
//
// Exit status: 0 when the prompt ended with `end_turn`, 1 when the agent failed or the turn
// ended otherwise, 2 for a task this client cannot run, 124 when the run's bound expired (the
// agent's process group is killed first). The last stdout line is a JSON summary.

import { spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

const DEFAULT_REQUEST_MS = 30_000;
const STARTUP_MS = 20_000;
const DEFAULT_TURN_TOTAL_MS = 180_000;
// A line from the agent larger than this is a protocol fault, not something to buffer.
const MAX_LINE_BYTES = 8 * 1024 * 1024;

function failTask(message) {
  process.stderr.write(`codex-acp client: cannot run this task: ${message}\n`);
  process.exit(2);
}

function log(message) {
  process.stderr.write(`codex-acp client: ${message}\n`);
}

const { values: args } = parseArgs({
  options: {
    agent: { type: "string" },
    task: { type: "string" },
    codex: { type: "string" },
    workspace: { type: "string" },
  },
});
for (const name of ["agent", "task", "codex", "workspace"]) {
  if (!args[name]) failTask(`--${name} is required`);
}

let task;
try {
  task = JSON.parse(readFileSync(args.task, "utf8"));
} catch (e) {
  failTask(`reading the task envelope ${args.task}: ${e.message}`);
}
if (typeof task?.prompt !== "string") failTask("the task envelope has no prompt");
if (task.relaunch) failTask("the codex-acp client cannot relaunch and resume a saved thread");
// One turn, no plan mode: an `approve` review has no plan to act on; `revise` cannot be done.
if ((task.plan_reviews ?? []).some((r) => r?.decision === "revise")) {
  failTask("the codex-acp client cannot review plans (it runs no plan mode)");
}
if (task.answers?.length) failTask("the codex-acp client cannot answer the model's questions");

const planning = task.mode === "planning";
if (!planning && task.mode !== "standard") {
  failTask(`mode \`${task.mode}\` (the codex-acp client runs \`standard\` and \`planning\`)`);
}
const approvals = task.approvals ?? (planning ? "user-decline" : "auto-review");
let modeId;
if (approvals === "auto-review") {
  if (planning) failTask("approvals `auto-review` in codex-acp's read-only mode (it always asks the user)");
  modeId = "agent";
} else if (approvals === "user-accept" || approvals === "user-decline") {
  modeId = planning ? "read-only" : "workspace-write";
} else {
  failTask(`approvals \`${approvals}\` (the codex-acp client can do auto-review, user-accept, user-decline)`);
}

if (!existsSync(args.agent)) failTask(`--agent ${args.agent} does not exist`);
if (!existsSync(args.codex)) failTask(`--codex ${args.codex} does not exist`);

const timeouts = task.timeouts ?? {};
const requestMs = timeouts.request_ms ?? DEFAULT_REQUEST_MS;
const turnMs = timeouts.turn_total_ms ?? DEFAULT_TURN_TOTAL_MS;

// The agent gets its own process group, so a bound that expires takes Codex down with it.
const agent = spawn(process.execPath, [args.agent], {
  cwd: args.workspace,
  env: { ...process.env, CODEX_PATH: args.codex, NO_BROWSER: "1" },
  stdio: ["pipe", "pipe", "inherit"],
  detached: true,
});

function killAgent() {
  try {
    process.kill(-agent.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

const runBound = setTimeout(() => {
  log(`the run did not end within ${Math.round((4 * requestMs + turnMs) / 1000)} s; killing the agent`);
  killAgent();
  process.exit(124);
}, 4 * requestMs + turnMs);

let nextId = 0;
const pending = new Map();
const transcript = { text: "", permissions: [], updates: 0 };

function send(message) {
  agent.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
}

function request(method, params, limitMs) {
  const id = nextId++;
  send({ id, method, params });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error(`${method}: no response within ${limitMs} ms`));
    }, limitMs);
    pending.set(id, { method, resolve, reject, timer });
  });
}

function choosePermission(params) {
  const options = params?.options ?? [];
  const wanted = approvals === "user-accept" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];
  for (const kind of wanted) {
    const option = options.find((o) => o.kind === kind);
    if (option) return { outcome: { outcome: "selected", optionId: option.optionId } };
  }
  return { outcome: { outcome: "cancelled" } };
}

function onAgentRequest(message) {
  if (message.method === "session/request_permission") {
    const result = choosePermission(message.params);
    transcript.permissions.push({
      title: message.params?.toolCall?.title ?? null,
      options: (message.params?.options ?? []).map((o) => o.kind),
      answer: result.outcome.optionId ?? result.outcome.outcome,
    });
    send({ id: message.id, result });
    return;
  }
  // The client declared no file system or terminal capability: nothing else is expected.
  send({ id: message.id, error: { code: -32601, message: `method not found: ${message.method}` } });
}

function onNotification(message) {
  if (message.method !== "session/update") return;
  transcript.updates += 1;
  const update = message.params?.update;
  if (update?.sessionUpdate === "agent_message_chunk" && update.content?.type === "text") {
    transcript.text += update.content.text;
  }
}

const lines = createInterface({ input: agent.stdout, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (Buffer.byteLength(line) > MAX_LINE_BYTES) {
    log(`the agent sent a line of ${Buffer.byteLength(line)} bytes (limit ${MAX_LINE_BYTES})`);
    killAgent();
    process.exit(1);
  }
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log(`the agent sent a line that is not JSON: ${line.slice(0, 200)}`);
    return;
  }
  if (message.method !== undefined && message.id !== undefined) return onAgentRequest(message);
  if (message.method !== undefined) return onNotification(message);
  const waiter = pending.get(message.id);
  if (!waiter) {
    log(`a response to no request: ${line.slice(0, 200)}`);
    return;
  }
  pending.delete(message.id);
  clearTimeout(waiter.timer);
  if (message.error) {
    waiter.reject(new Error(`${waiter.method}: ${message.error.message} (${message.error.code})`));
  } else {
    waiter.resolve(message.result);
  }
});

agent.on("exit", (code, signal) => {
  for (const [, waiter] of pending) {
    clearTimeout(waiter.timer);
    waiter.reject(new Error(`${waiter.method}: the agent exited (code ${code}, signal ${signal})`));
  }
  pending.clear();
});

async function main() {
  const init = await request(
    "initialize",
    {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "codex-driver-conformance", version: "1" },
    },
    // The first answer waits for the agent's own start-up (node loading its bundle) and its
    // launch of the app-server: seconds on a loaded machine, beyond a bound meant for one
    // request of a running app-server (5 s against the fake).
    Math.max(requestMs, STARTUP_MS),
  );
  log(`agent ${init?.agentInfo?.name ?? "?"} ${init?.agentInfo?.version ?? "?"}, protocol ${init?.protocolVersion}`);
  const session = await request("session/new", { cwd: args.workspace, mcpServers: [] }, requestMs);
  const sessionId = session.sessionId;
  const current = session.modes?.currentModeId;
  if (current !== modeId) {
    await request("session/set_mode", { sessionId, modeId }, requestMs);
  }
  log(`session ${sessionId}, mode ${modeId}, approvals ${approvals}`);
  const result = await request(
    "session/prompt",
    { sessionId, prompt: [{ type: "text", text: task.prompt }] },
    turnMs,
  );
  return { sessionId, mode: modeId, stopReason: result?.stopReason ?? null, ...transcript };
}

let exitCode = 1;
try {
  const summary = await main();
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  exitCode = summary.stopReason === "end_turn" ? 0 : 1;
} catch (e) {
  log(`the run failed: ${e.message}`);
}
clearTimeout(runBound);

// Whether the agent has no child process left: Linux lists each thread's children in
// /proc/PID/task/TID/children. Unknown (no /proc, or a kernel without that file) is `false`.
function childless(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`).every(
      (tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim() === "",
    );
  } catch {
    return false;
  }
}

// Closing stdin is how an ACP agent is told to stop; give it a moment, then end the group.
// codex-acp 2.6.0 closes its app-server's stdin at its own end of input but never exits, so the
// moment ends when its app-server is gone (the agent has no child left) rather than at the grace,
// which every run would otherwise wait out in full.
agent.stdin.end();
const exited = new Promise((resolve) => agent.once("exit", resolve));
let poll;
const grace = new Promise((resolve) => {
  const deadline = setTimeout(resolve, timeouts.shutdown_ms ?? 5_000);
  poll = setInterval(() => {
    if (childless(agent.pid)) {
      clearTimeout(deadline);
      resolve();
    }
  }, 10);
});
if (agent.exitCode === null && agent.signalCode === null) await Promise.race([exited, grace]);
clearInterval(poll);
killAgent();
process.exit(exitCode);
