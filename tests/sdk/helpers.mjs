// Shared set-up for the SDK tests: a private home for each test, scripted model replies, a driver that
// answers approvals and questions, and the parse errors the SDK reported.
//
// The binary under test comes from KIMI_AGENT_BIN (the Rust test that runs these files passes cargo's
// own debug build). Nothing here reaches the network: the model is the `_scripted_echo` provider or a
// local mock.

import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

export const BIN = process.env.KIMI_AGENT_BIN;
if (!BIN) {
  throw new Error("KIMI_AGENT_BIN must name the kimi-agent binary under test");
}

/** A temp directory with a share dir, a HOME and a work dir; removed by `cleanup`. */
export function makeHome(prefix = "kimi-sdk-") {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  const home = path.join(root, "home");
  const share = path.join(home, ".kimi");
  const work = path.join(root, "work");
  fs.mkdirSync(share, { recursive: true });
  fs.mkdirSync(work);
  return { root, home, share, work, cleanup: () => fs.rmSync(root, { recursive: true, force: true }) };
}

/** A `config.toml` whose default model is the scripted echo provider (scripts come per session). */
export function writeScriptedConfig(share) {
  fs.writeFileSync(
    path.join(share, "config.toml"),
    [
      'default_model = "scripted"',
      "",
      "[models.scripted]",
      'provider = "scripted"',
      'model = "scripted_echo"',
      "max_context_size = 100000",
      "",
      "[providers.scripted]",
      'type = "_scripted_echo"',
      'base_url = ""',
      'api_key = ""',
      "",
    ].join("\n"),
  );
}

/** Writes the model's replies (one per model call, in the echo DSL) and returns the session env. */
export function scripts(dir, replies) {
  const file = path.join(dir, `scripts-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(file, JSON.stringify(replies));
  return { KIMI_SCRIPTED_ECHO_SCRIPTS: file };
}

/** A `tool_call:` DSL line. */
export function toolCall(id, name, args) {
  return `tool_call: ${JSON.stringify({ id, name, arguments: JSON.stringify(args) })}`;
}

/** Options for `createSession` in `h`, with `replies` as the model; `extra` adds options and env. */
export function sessionOptions(h, replies, extra = {}) {
  const { env = {}, ...rest } = extra;
  return {
    workDir: h.work,
    executable: BIN,
    shareDir: h.share,
    env: { HOME: h.home, ...scripts(h.root, replies), ...env },
    ...rest,
  };
}

/**
 * Runs a turn to its end: approvals get `approval` ("approve" by default), questions `answer(payload)`.
 * Returns every event and the turn's result.
 */
export async function drive(turn, { approval = "approve", answer } = {}) {
  const events = [];
  for await (const event of turn) {
    events.push(event);
    if (event.type === "ApprovalRequest") {
      await turn.approve(event.payload.id, approval);
    } else if (event.type === "QuestionRequest") {
      assert.ok(answer, `unexpected question: ${JSON.stringify(event.payload)}`);
      // The JSON-RPC id of a request is its payload's id (as in the reference).
      await turn.respondQuestion(event.payload.id, event.payload.id, answer(event.payload));
    }
  }
  return { events, result: await turn.result };
}

/** What the SDK could not parse: its error events, and subagent events it failed to read. */
export function parseErrors(events) {
  return events.filter(
    (e) => e.type === "error" || (e.type === "SubagentEvent" && e.payload?.event?.type === "ParseError"),
  );
}

/** Asserts the SDK parsed every event of `events`. */
export function assertParsed(events) {
  assert.deepEqual(parseErrors(events), [], "the SDK reported events it cannot parse");
}

/** The text of the error ToolResult a call gets when its turn is cancelled (docs/protocol.md L3). */
export const CANCELLED_CALL = "The turn was cancelled before this call finished.";

/**
 * Asserts the call `id` got a cancelled (error) ToolResult before the turn's TurnEnd: a client that
 * tracks the calls it saw must never be left with an open one.
 */
export function assertCancelledBeforeTurnEnd(events, id) {
  const at = events.findIndex((e) => e.type === "ToolResult" && e.payload.tool_call_id === id);
  assert.ok(at >= 0, `no ToolResult for ${id}: ${events.map((e) => e.type)}`);
  const { is_error, message } = events[at].payload.return_value;
  assert.deepEqual({ is_error, message }, { is_error: true, message: CANCELLED_CALL });
  const end = events.findIndex((e) => e.type === "TurnEnd");
  assert.ok(at < end, `the ToolResult must come before TurnEnd: ${events.map((e) => e.type)}`);
}

/** A promise and the function that settles it. */
export function gate() {
  let open;
  const opened = new Promise((resolve) => (open = resolve));
  return { opened, open };
}

/** Payloads of the events of `type`. */
export function payloads(events, type) {
  return events.filter((e) => e.type === type).map((e) => e.payload);
}

/** The records of a session's wire.jsonl, as the server wrote them. */
export function wireRecords(sessionDir) {
  return fs
    .readFileSync(path.join(sessionDir, "wire.jsonl"), "utf-8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line));
}

/** An HTTP server on a free local port; `handler(req, body)` returns `{status, json?, text?, headers?}`. */
export async function mockServer(handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      const reply = handler(req, body);
      res.writeHead(reply.status ?? 200, {
        "content-type": reply.json !== undefined ? "application/json" : "text/plain",
        ...(reply.headers ?? {}),
      });
      res.end(reply.json !== undefined ? JSON.stringify(reply.json) : (reply.text ?? ""));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, requests, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** An OpenAI-compatible streamed answer saying `text`. */
export function sseText(text) {
  const chunk = (delta, finish) =>
    `data: ${JSON.stringify({
      id: "chatcmpl-mock",
      object: "chat.completion.chunk",
      created: 1,
      model: "mock",
      choices: [{ index: 0, delta, finish_reason: finish }],
    })}\n\n`;
  return chunk({ role: "assistant", content: text }, null) + chunk({}, "stop") + "data: [DONE]\n\n";
}
