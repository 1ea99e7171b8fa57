// Turns through the SDK's Session API: an approval, an external tool made with createExternalTool, a
// question answered with respondQuestion, plan mode on and off, a subagent, retries, MCP loading and an
// MCP call's approval; and turns cancelled (closed, interrupted) while a command runs or while a call
// waits for an approval, a client tool or a hook answer: every ToolCall still gets its ToolResult
// before TurnEnd.
// No flow may give the SDK an event it cannot parse.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import { ProtocolClient, createExternalTool, createSession } from "@moonshot-ai/kimi-agent-sdk";
import { z } from "zod";

import {
  BIN,
  assertCancelledBeforeTurnEnd,
  assertParsed,
  drive,
  gate,
  makeHome,
  payloads,
  scripts,
  sessionOptions,
  toolCall,
  wireRecords,
  writeScriptedConfig,
} from "./helpers.mjs";

/** A fresh home with the scripted model; removed after the file's tests. */
function home() {
  const h = makeHome();
  writeScriptedConfig(h.share);
  after(h.cleanup);
  return h;
}

/** The directory of the only session of `h`. */
function sessionDir(h) {
  const sessions = path.join(h.share, "sessions");
  const [hash] = fs.readdirSync(sessions);
  const [id] = fs.readdirSync(path.join(sessions, hash));
  return path.join(sessions, hash, id);
}

test("a Shell call asks for approval and runs once approved", async () => {
  const h = home();
  const session = createSession(
    sessionOptions(h, [toolCall("tc-1", "Shell", { command: "echo approved" }), "text: done"]),
  );
  try {
    const { events, result } = await drive(session.prompt("run it"));
    assert.deepEqual(result, { status: "finished", steps: undefined });
    assertParsed(events);
    const [request] = payloads(events, "ApprovalRequest");
    assert.equal(request.sender, "Shell");
    assert.equal(request.tool_call_id, "tc-1");
    assert.deepEqual(payloads(events, "ApprovalResponse"), [{ request_id: request.id, response: "approve" }]);
    const [toolResult] = payloads(events, "ToolResult");
    assert.equal(toolResult.return_value.output, "approved\n");
    assert.equal(toolResult.return_value.is_error, false);
  } finally {
    await session.close();
  }
});

test("a rejected approval stops the call", async () => {
  const h = home();
  const marker = path.join(h.root, "ran");
  const session = createSession(
    sessionOptions(h, [toolCall("tc-1", "Shell", { command: `touch ${marker}` }), "text: never"]),
  );
  try {
    const { events, result } = await drive(session.prompt("run it"), { approval: "reject" });
    assert.equal(result.status, "finished");
    assertParsed(events);
    assert.equal(payloads(events, "ToolResult")[0].return_value.is_error, true);
    assert.ok(!fs.existsSync(marker), "a rejected command must not run");
  } finally {
    await session.close();
  }
});

test("an external tool made with createExternalTool is called with its arguments", async () => {
  const h = home();
  const calls = [];
  const lookup = createExternalTool({
    name: "lookup_ticket",
    description: "Finds a ticket by its key.",
    parameters: z.object({ key: z.string(), verbose: z.boolean().optional() }),
    handler: async (params) => {
      calls.push(params);
      return { output: `ticket ${params.key}: open`, message: "found" };
    },
  });
  const session = createSession(
    sessionOptions(h, [toolCall("tc-ext", "lookup_ticket", { key: "KA-12" }), "text: it is open"], {
      externalTools: [lookup],
    }),
  );
  try {
    const { events, result } = await drive(session.prompt("is KA-12 open?"));
    assert.equal(result.status, "finished");
    assertParsed(events);
    assert.deepEqual(calls, [{ key: "KA-12" }]);
    const [toolResult] = payloads(events, "ToolResult");
    assert.equal(toolResult.tool_call_id, "tc-ext");
    assert.equal(toolResult.return_value.output, "ticket KA-12: open");
    assert.equal(toolResult.return_value.message, "found");
  } finally {
    await session.close();
  }
});

test("a question is answered with respondQuestion", async () => {
  const h = home();
  const ask = { questions: [{ question: "Which database?", options: [{ label: "pg" }, { label: "sqlite" }] }] };
  const session = createSession(sessionOptions(h, [toolCall("tc-q", "AskUserQuestion", ask), "text: ok"]));
  try {
    const asked = [];
    const { events, result } = await drive(session.prompt("ask me"), {
      answer: (payload) => {
        asked.push(payload);
        return { [payload.questions[0].question]: "sqlite" };
      },
    });
    assert.equal(result.status, "finished");
    assertParsed(events);
    assert.equal(asked[0].tool_call_id, "tc-q");
    assert.deepEqual(
      asked[0].questions[0].options.map((o) => o.label),
      ["pg", "sqlite"],
    );
    assert.equal(payloads(events, "ToolResult")[0].return_value.output, '{"answers": {"Which database?": "sqlite"}}');
  } finally {
    await session.close();
  }
});

test("plan mode goes on with setPlanMode and off when the plan is approved", async () => {
  const h = home();
  const write = toolCall("tc-w", "WriteFile", { path: "notes.txt", content: "x" });
  const session = createSession(
    sessionOptions(h, [
      "text: ready",
      write,
      "text: found the plan file",
      toolCall("tc-exit", "ExitPlanMode", {}),
      "text: executing",
    ]),
  );
  try {
    // setPlanMode needs a running process: the first turn starts it.
    assertParsed((await drive(session.prompt("hello"))).events);
    assert.equal(await session.setPlanMode(true), true);
    assert.equal(session.planMode, true);

    // In plan mode a write elsewhere is refused and names the plan file.
    const refused = await drive(session.prompt("write notes"));
    assertParsed(refused.events);
    const message = payloads(refused.events, "ToolResult")[0].return_value.message;
    assert.match(message, /^Plan mode is active\./);
    assert.equal(payloads(refused.events, "StatusUpdate")[0].plan_mode, true);
    const planFile = message.split("`")[1];
    fs.mkdirSync(path.dirname(planFile), { recursive: true });
    fs.writeFileSync(planFile, "# Plan\n1. do it\n");

    // ExitPlanMode shows the plan (PlanDisplay: an event this SDK cannot parse, so not sent to it) and
    // asks; approving ends plan mode.
    const exit = await drive(session.prompt("submit the plan"), {
      answer: (payload) => ({ [payload.questions[0].question]: "Approve" }),
    });
    assertParsed(exit.events);
    assert.equal(payloads(exit.events, "ToolResult")[0].return_value.message, "Plan approved");
    assert.equal(payloads(exit.events, "StatusUpdate").at(-1).plan_mode, false);
    const recorded = wireRecords(sessionDir(h)).map((r) => r.message?.type);
    assert.ok(recorded.includes("PlanDisplay"), "the session file keeps every event");

    assert.equal(await session.setPlanMode(true), true);
    assert.equal(await session.setPlanMode(false), false);
  } finally {
    await session.close();
  }
});

test("retries, a subagent and MCP loading give the SDK nothing it cannot parse", async () => {
  const h = home();
  const mcpServer = process.env.KIMI_AGENT_MCP_TEST_SERVER;
  if (mcpServer) {
    fs.writeFileSync(
      path.join(h.share, "mcp.json"),
      JSON.stringify({ mcpServers: { probe: { command: mcpServer, args: [] } } }),
    );
  }
  const report = "The module parses the config and validates it. ".repeat(6).trim();
  const session = createSession(
    sessionOptions(h, [
      "error: 503 busy",
      toolCall("tc-a", "Agent", { description: "read config", prompt: "Explain", subagent_type: "explore" }),
      `text: ${report}`,
      "text: all done",
    ]),
  );
  try {
    const { events, result } = await drive(session.prompt("go"));
    assert.equal(result.status, "finished");
    assertParsed(events);
    const wrapped = payloads(events, "SubagentEvent");
    assert.ok(wrapped.length > 0, "the subagent's events reach the client");
    assert.ok(wrapped.every((w) => w.parent_tool_call_id === "tc-a"));
    const sent = new Set(events.map((e) => e.type));
    const recorded = new Set(wireRecords(sessionDir(h)).map((r) => r.message?.type));
    assert.ok(recorded.has("StepRetry") && !sent.has("StepRetry"), "a retry is recorded, not sent");
    if (mcpServer) {
      assert.ok(recorded.has("MCPLoadingBegin") && recorded.has("MCPLoadingEnd"), [...recorded].join());
    }
  } finally {
    await session.close();
  }
});

test("an MCP call's approval shows its arguments and the SDK parses it", async (t) => {
  const mcpServer = process.env.KIMI_AGENT_MCP_TEST_SERVER;
  if (!mcpServer) {
    t.skip("KIMI_AGENT_MCP_TEST_SERVER is not set");
    return;
  }
  const h = home();
  fs.writeFileSync(
    path.join(h.share, "mcp.json"),
    JSON.stringify({ mcpServers: { probe: { command: mcpServer, args: [] } } }),
  );
  const session = createSession(
    sessionOptions(h, [toolCall("tc-m", "echo", { text: "from the sdk" }), "text: done"]),
  );
  try {
    const { events, result } = await drive(session.prompt("echo it"));
    assert.equal(result.status, "finished");
    assertParsed(events);
    // The SDK names itself in `initialize`, so it gets the details the reference leaves out.
    const [request] = payloads(events, "ApprovalRequest");
    assert.equal(request.description, 'Call MCP tool `echo`. (approve for session covers every "mcp:echo" request)');
    assert.deepEqual(request.display, [{ type: "brief", text: 'Arguments: {"text":"from the sdk"}' }]);
    assert.deepEqual(payloads(events, "ToolResult")[0].return_value.output, [{ type: "text", text: "echo:from the sdk" }]);
  } finally {
    await session.close();
  }
});

test("closing the session mid-turn answers the turn as cancelled", async () => {
  const h = home();
  const started = path.join(h.root, "started");
  const session = createSession(
    sessionOptions(h, [toolCall("tc-1", "Shell", { command: `touch ${started}; sleep 30` }), "text: never"], {
      yoloMode: true,
    }),
  );
  const turn = session.prompt("long job");
  const events = [];
  const consumed = (async () => {
    for await (const event of turn) {
      events.push(event);
      if (event.type === "ToolCall") {
        // Stop the session (SIGTERM, as the SDK does) while the command runs.
        while (!fs.existsSync(started)) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await session.close();
      }
    }
  })();
  await consumed;
  assert.deepEqual(await turn.result, { status: "cancelled", steps: undefined });
  assertParsed(events);
  assert.equal(events.at(-1).type, "TurnEnd");
  assertCancelledBeforeTurnEnd(events, "tc-1");
});

test("interrupt cancels the running turn and the session goes on", async () => {
  const h = home();
  const session = createSession(
    sessionOptions(h, [toolCall("tc-1", "Shell", { command: "sleep 30" }), "text: after"], { yoloMode: true }),
  );
  try {
    const turn = session.prompt("long job");
    const events = [];
    for await (const event of turn) {
      events.push(event);
      if (event.type === "ToolCall") {
        await turn.interrupt();
      }
    }
    assert.equal((await turn.result).status, "cancelled");
    assertParsed(events);
    assertCancelledBeforeTurnEnd(events, "tc-1");
    const next = await drive(session.prompt("again"));
    assert.equal(next.result.status, "finished");
  } finally {
    await session.close();
  }
});

test("interrupt while an approval waits answers the call as cancelled, and nothing runs", async () => {
  const h = home();
  const marker = path.join(h.root, "ran");
  const session = createSession(
    sessionOptions(h, [toolCall("tc-1", "Shell", { command: `touch ${marker}` }), "text: after"]),
  );
  try {
    const turn = session.prompt("run it");
    const events = [];
    for await (const event of turn) {
      events.push(event);
      if (event.type === "ApprovalRequest") {
        // Never answered: the user interrupts instead.
        await turn.interrupt();
      }
    }
    assert.equal((await turn.result).status, "cancelled");
    assertParsed(events);
    assertCancelledBeforeTurnEnd(events, "tc-1");
    assert.ok(!fs.existsSync(marker), "an unapproved command must not run");
    const next = await drive(session.prompt("again"));
    assert.equal(next.result.status, "finished");
  } finally {
    await session.close();
  }
});

test("interrupt while a createExternalTool call is pending answers the call, and a late answer is harmless", async () => {
  const h = home();
  const answered = gate();
  let turn;
  const slow = createExternalTool({
    name: "slow_lookup",
    description: "Looks something up, slowly.",
    parameters: z.object({ key: z.string() }),
    handler: async () => {
      // The user gives up while the client still works on the call; it answers only after the turn ended.
      await turn.interrupt();
      await answered.opened;
      return { output: "too late", message: "late" };
    },
  });
  const session = createSession(
    sessionOptions(h, [toolCall("tc-ext", "slow_lookup", { key: "KA-1" }), "text: after"], {
      externalTools: [slow],
    }),
  );
  try {
    turn = session.prompt("look it up");
    const events = [];
    for await (const event of turn) {
      events.push(event);
    }
    assert.equal((await turn.result).status, "cancelled");
    assertParsed(events);
    assertCancelledBeforeTurnEnd(events, "tc-ext");
    answered.open();
    const next = await drive(session.prompt("again"));
    assert.equal(next.result.status, "finished");
    assertParsed(next.events);
    assert.deepEqual(payloads(next.events, "ToolResult"), [], "the late answer must not surface");
  } finally {
    await session.close();
  }
});

// The Session API takes no hooks; the SDK's ProtocolClient (which it is built on) does.
test("cancel while a hook answer is pending answers the call as cancelled, and nothing runs", async () => {
  const h = home();
  const marker = path.join(h.root, "ran");
  const answered = gate();
  const client = new ProtocolClient();
  const hooked = [];
  await client.start({
    workDir: h.work,
    executablePath: BIN,
    yoloMode: true,
    environmentVariables: {
      HOME: h.home,
      KIMI_SHARE_DIR: h.share,
      ...scripts(h.root, [toolCall("tc-1", "Shell", { command: `touch ${marker}` }), "text: never"]),
    },
    hooks: [
      {
        id: "check-shell",
        event: "PreToolUse",
        matcher: "^Shell$",
        handler: async (request) => {
          hooked.push(request.input_data.tool_call_id);
          await client.sendCancel();
          await answered.opened;
          return { action: "allow" };
        },
      },
    ],
  });
  try {
    const stream = client.sendPrompt("run it");
    const events = [];
    for await (const event of stream.events) {
      events.push(event);
    }
    assert.equal((await stream.result).status, "cancelled");
    assert.deepEqual(hooked, ["tc-1"]);
    assertParsed(events);
    assertCancelledBeforeTurnEnd(events, "tc-1");
    answered.open();
    assert.ok(!fs.existsSync(marker), "a command whose hook never answered must not run");
  } finally {
    await client.stop();
  }
});
