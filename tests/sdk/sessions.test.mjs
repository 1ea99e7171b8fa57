// Sessions as the SDK reads them from the files the server wrote: listSessions (with the server's
// title), listSessionsForWorkspace, getRegisteredWorkDirs, parseSessionEvents, forkSession then a
// resumed session on the fork, deleteSession.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import { assertParsed, drive, makeHome, sessionOptions, writeScriptedConfig } from "./helpers.mjs";

const h = makeHome();
writeScriptedConfig(h.share);
after(h.cleanup);
// The SDK's storage functions read KIMI_SHARE_DIR once, when it is loaded.
process.env.KIMI_SHARE_DIR = h.share;
const sdk = await import("@moonshot-ai/kimi-agent-sdk");

/** Runs `prompts` in one session (the model answers `reply <n>`) and returns its id. */
async function runSession(prompts, sessionId) {
  const replies = prompts.map((_, n) => `text: reply ${n + 1}`);
  const session = sdk.createSession(sessionOptions(h, replies, sessionId ? { sessionId } : {}));
  try {
    for (const prompt of prompts) {
      const { events, result } = await drive(session.prompt(prompt));
      assert.equal(result.status, "finished");
      assertParsed(events);
    }
    return session.sessionId;
  } finally {
    await session.close();
  }
}

/** The user messages of a session's context.jsonl, as the model would see them on resume. */
function contextUserTexts(sessionId) {
  const file = path.join(sdk.KimiPaths.sessionDir(h.work, sessionId), "context.jsonl");
  return fs
    .readFileSync(file, "utf-8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line))
    .filter((record) => record.role === "user")
    .map((record) => (typeof record.content === "string" ? record.content : record.content[0].text));
}

const LONG_PROMPT =
  "Please refactor the configuration loader so that it reports every invalid key at once";

test("listSessions shows each session with the server's title", async () => {
  const short = await runSession(["hi"]);
  const long = await runSession([LONG_PROMPT]);
  const sessions = await sdk.listSessions(h.work);
  const brief = Object.fromEntries(sessions.map((s) => [s.id, s.brief]));
  assert.equal(brief[short], "hi");
  // The reference's title (the first prompt shortened to 50 characters), not the whole prompt.
  assert.equal(brief[long], "Please refactor the configuration loader so that…");
  for (const s of sessions) {
    assert.equal(s.workDir, h.work);
    assert.ok(fs.existsSync(s.contextFile));
  }

  assert.deepEqual(sdk.getRegisteredWorkDirs(h.root), [h.work]);
  const inWorkspace = await sdk.listSessionsForWorkspace(h.root);
  assert.deepEqual(new Set(inWorkspace.map((s) => s.id)), new Set([short, long]));
});

test("parseSessionEvents reads back what the server recorded", async () => {
  const id = await runSession(["first question", "second question"]);
  const events = await sdk.parseSessionEvents(h.work, id);
  assert.deepEqual(
    events.map((e) => e.type),
    [
      "TurnBegin",
      "StepBegin",
      "ContentPart",
      "StatusUpdate",
      "TurnEnd",
      "TurnBegin",
      "StepBegin",
      "ContentPart",
      "StatusUpdate",
      "TurnEnd",
    ],
  );
  assert.deepEqual(
    events.filter((e) => e.type === "TurnBegin").map((e) => e.payload.user_input),
    ["first question", "second question"],
  );
  assert.deepEqual(events[2].payload, { type: "text", text: "reply 1" });
});

test("forkSession keeps the first turn, and the fork resumes from it", async () => {
  const source = await runSession(["keep this turn", "drop this turn"]);
  const fork = await sdk.forkSession({ workDir: h.work, sourceSessionId: source, turnIndex: 0 });
  assert.notEqual(fork.sessionId, source);
  assert.deepEqual(contextUserTexts(fork.sessionId), ["keep this turn"]);

  await runSession(["continue the fork"], fork.sessionId);
  assert.deepEqual(contextUserTexts(fork.sessionId), ["keep this turn", "continue the fork"]);
  const events = await sdk.parseSessionEvents(h.work, fork.sessionId);
  assert.deepEqual(
    events.filter((e) => e.type === "TurnBegin").map((e) => e.payload.user_input),
    ["keep this turn", "continue the fork"],
  );
  assert.deepEqual(contextUserTexts(source), ["keep this turn", "drop this turn"], "the source is untouched");
  // The fork has no state.json, so (as in the reference) its first finished turn in the server titles it.
  const listed = (await sdk.listSessions(h.work)).find((s) => s.id === fork.sessionId);
  assert.equal(listed.brief, "continue the fork");
});

test("deleteSession removes a session from the list", async () => {
  const id = await runSession(["short lived"]);
  assert.ok((await sdk.listSessions(h.work)).some((s) => s.id === id));
  assert.equal(await sdk.deleteSession(h.work, id), true);
  assert.ok(!(await sdk.listSessions(h.work)).some((s) => s.id === id));
  assert.equal(await sdk.deleteSession(h.work, id), false);
});
