// The VS Code extension's check of a CLI (managers/cli.manager.ts), reproduced against our binary: it
// reads `info --json`, refuses a kimi_cli_version below 0.82 or a wire_protocol_version below 1.1, then
// does a bare handshake through the SDK's ProtocolClient and stops it. Also: everything works when the
// binary is found as `kimi` on PATH, the name the SDK and the extension spawn by default.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";

import { BIN, makeHome } from "./helpers.mjs";

const run = promisify(execFile);
// A new user: no configuration yet (the first start writes the defaults).
const h = makeHome();
after(h.cleanup);
// The SDK reads KIMI_SHARE_DIR once, when it is loaded.
process.env.KIMI_SHARE_DIR = h.share;
const { ProtocolClient, listSessions } = await import("@moonshot-ai/kimi-agent-sdk");

// The extension's own rule: dotted numbers compared part by part, a missing part counting as 0.
function versionAtLeast(version, minimum) {
  const a = version.split(".").map(Number);
  const b = minimum.split(".").map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const diff = (a[i] || 0) - (b[i] || 0);
    if (diff !== 0) {
      return diff > 0;
    }
  }
  return true;
}

const env = { ...process.env, HOME: h.home, KIMI_SHARE_DIR: h.share };

/** The extension's gate and handshake, with `executable` resolved in `spawnEnv`. */
async function extensionCheck(executable, spawnEnv) {
  const { stdout } = await run(executable, ["info", "--json"], { env: spawnEnv });
  const info = JSON.parse(stdout);
  assert.ok(versionAtLeast(info.kimi_cli_version, "0.82"), `kimi_cli_version ${info.kimi_cli_version}`);
  assert.ok(versionAtLeast(info.wire_protocol_version, "1.1"), `wire ${info.wire_protocol_version}`);
  const client = new ProtocolClient();
  try {
    return await client.start({
      sessionId: undefined,
      workDir: h.work,
      executablePath: executable === "kimi" ? undefined : executable,
      environmentVariables: spawnEnv,
    });
  } finally {
    await client.stop();
  }
}

test("the extension's gate and bare handshake pass, and leave no session behind", async () => {
  const init = await extensionCheck(BIN, env);
  assert.equal(init.protocol_version, "1.10");
  assert.ok(init.slash_commands.some((c) => c.name === "compact"));
  assert.equal(init.capabilities?.supports_question, true);
  // The check opened a session and wrote nothing to it: it must not show up in the history.
  assert.deepEqual(await listSessions(h.work), []);
});

test("invoked as `kimi`, help, errors, info and the handshake behave the same", async () => {
  const bin = path.join(h.root, "bin");
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(BIN, path.join(bin, "kimi"));
  const kimiEnv = { ...env, PATH: `${bin}${path.delimiter}${process.env.PATH}` };

  const asKimi = await run("kimi", ["info", "--json"], { env: kimiEnv });
  const asItself = await run(BIN, ["info", "--json"], { env });
  assert.equal(asKimi.stdout, asItself.stdout);

  const help = await run("kimi", ["--help"], { env: kimiEnv });
  assert.match(help.stdout, /^A headless coding agent/m);
  assert.match(help.stdout, /Usage: kimi \[OPTIONS\]/);
  assert.match(help.stdout, /\blogin\b.*\n.*\blogout\b/);

  const bad = await run("kimi", ["--no-such-flag"], { env: kimiEnv }).catch((e) => e);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unexpected argument '--no-such-flag'/);

  const init = await extensionCheck("kimi", kimiEnv);
  assert.equal(init.protocol_version, "1.10");
});
