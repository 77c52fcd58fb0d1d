// A scripted editor on the official ACP TypeScript SDK (@agentclientprotocol/sdk): spawns the
// agent, sends the plan's requests through the SDK's ClientContext, answers the agent's
// requests with the SDK's client handlers (permissions allowed once, fs on the real disk), and
// prints {"results": [...], "updates": [...]} as one JSON line. Every line in both directions
// is appended, in the order it passed, to the plan's transcript file ({"direction", "line"}),
// which the pytest side checks against the vendored ACP schema.
//
//   node client.mjs PLAN.json
//   PLAN: {"command": [...], "cwd": "...", "env": {...}, "transcript": "...",
//          "steps": [{"method": "initialize", "params": {...}}, ...]}
//
// In a step's params the string "$sid" stands for the last session id a session/new or
// session/fork answered, "$sid1" for the first one.
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { Readable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const STEP_TIMEOUT_MS = 30_000;

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));

function recorder(direction) {
  const decoder = new TextDecoder();
  let pending = "";
  return (chunk) => {
    pending += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      appendFileSync(plan.transcript, JSON.stringify({ direction, line }) + "\n");
    }
  };
}

function substitute(value, ids) {
  if (typeof value === "string") {
    if (value === "$sid") return ids.at(-1);
    if (value === "$sid1") return ids[0];
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, ids));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, ids)]));
  }
  return value;
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${STEP_TIMEOUT_MS} ms`)),
                       STEP_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const agent = spawn(plan.command[0], plan.command.slice(1), {
  cwd: plan.cwd, env: plan.env, stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));
const fromAgent = recorder("agent->client");
const toAgent = recorder("client->agent");
const input = Readable.toWeb(agent.stdout).pipeThrough(new TransformStream({
  transform(chunk, controller) {
    fromAgent(chunk); // before the SDK sees it: a reply to it is recorded after it
    controller.enqueue(chunk);
  },
}));
const output = new WritableStream({
  write(chunk) {
    toAgent(chunk);
    return new Promise((resolve, reject) => agent.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
  },
  close() {
    agent.stdin.end();
  },
});

const updates = [];
const app = client({ name: "talaria-ts-tests" })
  .onRequest("session/request_permission", () => ({
    outcome: { outcome: "selected", optionId: "allow_once" },
  }))
  .onRequest("fs/read_text_file", ({ params }) => ({ content: readFileSync(params.path, "utf8") }))
  .onRequest("fs/write_text_file", ({ params }) => {
    writeFileSync(params.path, params.content);
    return {};
  })
  .onNotification("session/update", ({ params }) => {
    updates.push(params);
  });

const results = [];
try {
  await app.connectWith(ndJsonStream(output, input), async (ctx) => {
    const ids = [];
    for (const step of plan.steps) {
      const params = substitute(step.params ?? {}, ids);
      try {
        const result = await withTimeout(ctx.request(step.method, params), step.method);
        if (result && typeof result.sessionId === "string") ids.push(result.sessionId);
        results.push({ method: step.method, result });
      } catch (error) {
        if (!("code" in error)) throw error; // not the agent's answer: the run fails
        results.push({ method: step.method, error: { code: error.code, message: error.message,
                                                     data: error.data } });
      }
    }
  });
} finally {
  agent.stdin.end();
}
const code = await withTimeout(exited, "the agent's exit");
process.stdout.write(JSON.stringify({ results, updates, exitCode: code }) + "\n");
