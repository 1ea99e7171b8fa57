// A side question (`/btw`, issue 18) from the SDK 0.1.x: the server answers it, but the BtwBegin/BtwEnd
// events are not in the SDK's schema, so this client is not sent them. It gets the prompt's answer, no
// event it cannot parse, and the conversation goes on.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import { createSession } from "@moonshot-ai/kimi-agent-sdk";

import { assertParsed, drive, makeHome, sessionOptions, wireRecords, writeScriptedConfig } from "./helpers.mjs";

test("a side question gives the SDK 0.1.x neither Btw events nor a parse error", async () => {
  const h = makeHome();
  writeScriptedConfig(h.share);
  after(h.cleanup);
  const session = createSession(
    sessionOptions(h, ["text: Hello.", "text: Forty-two.", "text: Still here."]),
  );
  try {
    const first = await drive(session.prompt("hi"));
    assert.equal(first.result.status, "finished");

    const side = await drive(session.prompt("/btw what is the answer?"));
    assert.deepEqual(side.result, { status: "finished", steps: undefined });
    assertParsed(side.events);
    const types = side.events.map((e) => e.type);
    assert.ok(!types.includes("BtwBegin") && !types.includes("BtwEnd"), types.join());
    // Nothing of a turn either: a side question is not one.
    assert.ok(!types.includes("TurnBegin"), types.join());

    const next = await drive(session.prompt("go on"));
    assert.equal(next.result.status, "finished");
    assertParsed(next.events);
  } finally {
    await session.close();
  }
  // The server did answer it: the session file has the pair, with the model's answer.
  const sessions = path.join(h.share, "sessions");
  const [hash] = fs.readdirSync(sessions);
  const [id] = fs.readdirSync(path.join(sessions, hash));
  const records = wireRecords(path.join(sessions, hash, id)).map((r) => r.message);
  const begin = records.find((m) => m?.type === "BtwBegin");
  const end = records.find((m) => m?.type === "BtwEnd");
  assert.equal(begin?.payload?.question, "what is the answer?", JSON.stringify(records));
  assert.equal(end?.payload?.response, "Forty-two.", JSON.stringify(records));
  assert.equal(end?.payload?.id, begin?.payload?.id);
});
