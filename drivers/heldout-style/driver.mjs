#!/usr/bin/env node
// A small Node.js client of `codex app-server`, written in an event-driven style (one
// readline stream, a table of pending requests, promises with timers) unlike the harness's
// other drivers. It reads the task envelope, runs one turn in the task's workspace, mode,
// approvals and model, answers every server request, and exits 0 only when its own turn
// completed. Usage: node driver.mjs --task FILE --cwd DIR --prompt TEXT [--model NAME]
// (codex from $CODEX_BIN).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const argv = process.argv.slice(2);
const option = (name) => {
  const at = argv.indexOf(name);
  if (at < 0 || at + 1 >= argv.length) fail(2, `missing ${name}`);
  return argv[at + 1];
};

function fail(status, why) {
  process.stderr.write(`heldout-style driver: ${why}\n`);
  process.exit(status);
}

const task = JSON.parse(readFileSync(option("--task"), "utf8"));
const workspace = option("--cwd");
const prompt = option("--prompt");
// `--model ""` (the task names none): the app-server's configured model.
const model = argv.includes("--model") ? option("--model") || task.model : task.model;
const timeouts = task.timeouts ?? {};
const requestMs = timeouts.request_ms ?? 10000;
const idleMs = timeouts.turn_idle_ms ?? 60000;
const turnTotalMs = timeouts.turn_total_ms ?? 300000;
const shutdownMs = timeouts.shutdown_ms ?? 2000;

// What this driver cannot do is refused, never ignored.
for (const field of ["plan_reviews", "answers", "relaunch", "workspace", "context", "steer_text"]) {
  if (task[field] !== undefined && task[field] !== null && !(Array.isArray(task[field]) && task[field].length === 0)) {
    fail(2, `the task's ${field} is not supported`);
  }
}
if (task.resume_on_crash) fail(2, "the task's resume_on_crash is not supported");
const SANDBOX_BY_MODE = { planning: "read-only", standard: "workspace-write" };
const sandbox = SANDBOX_BY_MODE[task.mode];
if (!sandbox) fail(2, `mode ${task.mode} is not supported`);
const approvals = task.approvals ?? "user-default";
const APPROVALS = {
  "auto-review": { approvalPolicy: "on-request", approvalsReviewer: "auto_review", grant: false },
  never: { approvalPolicy: "never", approvalsReviewer: "user", grant: false },
  "user-accept": { approvalPolicy: "on-request", approvalsReviewer: "user", grant: true },
  "user-decline": { approvalPolicy: "on-request", approvalsReviewer: "user", grant: false },
  "user-default": { approvalPolicy: "on-request", approvalsReviewer: "user", grant: false },
};
const policy = APPROVALS[approvals];
if (!policy) fail(2, `approvals ${approvals} are not supported`);

// Only what codex needs: the driver's own secrets stay here.
const KEPT_ENV = ["PATH", "HOME", "CODEX_HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "USER"];
const childEnv = Object.fromEntries(KEPT_ENV.filter((k) => k in process.env).map((k) => [k, process.env[k]]));
const codex = spawn(process.env.CODEX_BIN ?? "codex", ["app-server"], {
  env: childEnv,
  stdio: ["pipe", "pipe", "pipe"],
});
let stderrTail = "";
codex.stderr.on("data", (chunk) => {
  stderrTail = (stderrTail + chunk.toString()).slice(-4096);
});
const exited = new Promise((resolve) => codex.on("exit", (code, signal) => resolve({ code, signal })));
codex.stdin.on("error", () => {});

let nextId = 1;
const pending = new Map();
const turnWaiters = [];
const earlyCompletions = new Map();
let lastMessageAt = Date.now();
let streamEnded = false;

function send(message) {
  codex.stdin.write(JSON.stringify(message) + "\n");
}

function request(method, params) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error(`${method}: no answer within ${requestMs} ms`));
    }, requestMs);
    pending.set(id, { method, resolve, reject, timer });
    send({ jsonrpc: "2.0", id, method, params });
  });
}

function answerServerRequest(message) {
  const { id, method } = message;
  const decide = (yes, no) => send({ id, result: { decision: policy.grant ? yes : no } });
  switch (method) {
    case "item/commandExecution/requestApproval":
    case "item/fileChange/requestApproval":
      return decide("accept", "decline");
    case "execCommandApproval":
    case "applyPatchApproval":
      // ReviewDecision's plain refusal is "abort" ("denied" is an object form).
      return decide("approved", "abort");
    default:
      // Permissions, user input, elicitation, tools and anything newer: a refusal.
      return send({ id, error: { code: -32601, message: `${method} is not handled by this client` } });
  }
}

function onLine(line) {
  lastMessageAt = Date.now();
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return abort(new Error(`not JSON from codex: ${line.slice(0, 80)}`));
  }
  if (message.method !== undefined && message.id !== undefined) return answerServerRequest(message);
  if (message.method === undefined) {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    clearTimeout(waiter.timer);
    if (message.error) return waiter.reject(new Error(`${waiter.method} failed: ${message.error.message}`));
    return waiter.resolve(message.result);
  }
  if (message.method === "turn/completed") {
    const turn = message.params?.turn ?? {};
    // Kept until the turn/start answer names our turn: it may arrive first.
    earlyCompletions.set(turn.id, turn);
    for (const waiter of turnWaiters) waiter();
  } else if (message.method === "item/completed" && message.params?.item?.type === "agentMessage") {
    process.stdout.write(`${message.params.item.text ?? ""}\n`);
  }
}

let aborted = null;
function abort(error) {
  aborted ??= error;
  for (const waiter of turnWaiters) waiter();
  for (const [, waiter] of pending) {
    clearTimeout(waiter.timer);
    waiter.reject(error);
  }
  pending.clear();
}

// Idle is silence on the pipe: a megabyte line still arriving is not silence.
codex.stdout.on("data", () => {
  lastMessageAt = Date.now();
});
const lines = createInterface({ input: codex.stdout, crlfDelay: Infinity });
lines.on("line", onLine);
lines.on("close", () => {
  streamEnded = true;
  abort(new Error("codex app-server closed its output"));
});

function waitForTurn(turnId) {
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (earlyCompletions.has(turnId)) return finish(() => resolve(earlyCompletions.get(turnId)));
      if (aborted) return finish(() => reject(aborted));
      const now = Date.now();
      if (now - lastMessageAt > idleMs) return finish(() => reject(new Error(`turn idle for ${idleMs} ms`)));
      if (now - startedAt > turnTotalMs) return finish(() => reject(new Error(`turn longer than ${turnTotalMs} ms`)));
    };
    const ticker = setInterval(check, 100);
    const finish = (settle) => {
      clearInterval(ticker);
      turnWaiters.splice(turnWaiters.indexOf(check), 1);
      settle();
    };
    turnWaiters.push(check);
    check();
  });
}

async function shutdown() {
  codex.stdin.end();
  const timer = new Promise((resolve) => setTimeout(() => resolve(null), shutdownMs));
  if ((await Promise.race([exited, timer])) === null) {
    codex.kill("SIGKILL");
    await exited;
  }
}

async function run() {
  await request("initialize", {
    clientInfo: { name: "heldout-style", version: "0.1.0" },
    capabilities: { experimentalApi: true },
  });
  send({ method: "initialized" });
  const threadParams = {
    cwd: workspace,
    sandbox,
    approvalPolicy: policy.approvalPolicy,
    approvalsReviewer: policy.approvalsReviewer,
  };
  if (model) threadParams.model = model;
  const thread = await request("thread/start", threadParams);
  const threadId = thread.thread.id;
  const turnParams = { threadId, input: [{ type: "text", text: prompt }] };
  if (task.mode === "planning") {
    // Plan mode on top of the read-only sandbox: the model may ask the user (requestUserInput).
    const settings = { model: thread.model ?? model ?? "default", reasoning_effort: null, developer_instructions: null };
    turnParams.collaborationMode = { mode: "plan", settings };
  }
  const started = await request("turn/start", turnParams);
  const turn = await waitForTurn(started.turn.id);
  process.stdout.write(`turn ${turn.status}\n`);
  return turn.status === "completed" ? 0 : 1;
}

let status;
try {
  status = await run();
} catch (error) {
  process.stderr.write(`heldout-style driver: ${error.message}\n`);
  if (stderrTail && streamEnded) process.stderr.write(stderrTail);
  status = 1;
}
await shutdown();
process.exit(status);
