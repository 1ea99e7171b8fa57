// Signing in through the SDK (login(), isLoggedIn(), parseConfig(), logout()) against a local mock of
// the Kimi account server's device flow, then a session on the account's model that sends its token.

import assert from "node:assert/strict";
import { after, test } from "node:test";

import { createSession, isLoggedIn, login, logout, parseConfig } from "@moonshot-ai/kimi-agent-sdk";

import { BIN, assertParsed, drive, makeHome, mockServer, payloads, sseText } from "./helpers.mjs";

const ACCESS_TOKEN = "sdk-access-token";

const account = await mockServer((req, body) => {
  const form = new URLSearchParams(body);
  if (req.method === "POST" && req.url === "/api/oauth/device_authorization") {
    return {
      json: {
        user_code: "SDK-0001",
        device_code: "device-sdk",
        verification_uri: `${account.url}/device`,
        verification_uri_complete: `${account.url}/device?user_code=SDK-0001`,
        expires_in: 600,
        interval: 1,
      },
    };
  }
  if (req.method === "POST" && req.url === "/api/oauth/token" && form.get("device_code") === "device-sdk") {
    return {
      json: {
        access_token: ACCESS_TOKEN,
        refresh_token: "sdk-refresh-token",
        expires_in: 3600,
        scope: "kimi-code",
        token_type: "Bearer",
      },
    };
  }
  if (req.method === "GET" && req.url === "/v1/models") {
    return {
      json: {
        data: [
          { id: "kimi-for-coding", context_length: 262144, supports_reasoning: true, display_name: "Kimi for Coding" },
        ],
      },
    };
  }
  if (req.method === "POST" && req.url === "/v1/chat/completions") {
    if (req.headers.authorization !== `Bearer ${ACCESS_TOKEN}`) {
      return { status: 401, json: { error: { message: "Invalid Authentication" } } };
    }
    return { headers: { "content-type": "text/event-stream" }, text: sseText("signed in and answering") };
  }
  return { status: 404, json: { error: "not found" } };
});
after(account.close);

const h = makeHome();
after(h.cleanup);

// What the extension passes: its `kimi.environmentVariables` setting plus the executable path.
const env = {
  HOME: h.home,
  KIMI_SHARE_DIR: h.share,
  KIMI_CODE_OAUTH_HOST: account.url,
  KIMI_CODE_BASE_URL: `${account.url}/v1`,
  // Nothing to open in a test; `true` accepts the URL and does nothing.
  BROWSER: "true",
};

test("login, a session on the account's model, and logout", async () => {
  assert.equal(isLoggedIn(h.share), false);

  const urls = [];
  const result = await login({ executable: BIN, env, onUrl: (url) => urls.push(url) });
  assert.deepEqual(result, { success: true });
  assert.deepEqual(urls, [`${account.url}/device?user_code=SDK-0001`]);
  assert.equal(isLoggedIn(h.share), true);
  const config = parseConfig(h.share);
  assert.equal(config.defaultModel, "kimi-code/kimi-for-coding");
  assert.equal(config.defaultThinking, true);
  // SDK 0.1.8 names a model by its key.
  assert.deepEqual(config.models, [
    { id: "kimi-code/kimi-for-coding", name: "kimi-code/kimi-for-coding", capabilities: ["thinking"] },
  ]);

  const session = createSession({ workDir: h.work, executable: BIN, env, thinking: true });
  try {
    const { events, result: turn } = await drive(session.prompt("hello"));
    assert.equal(turn.status, "finished");
    assertParsed(events);
    assert.deepEqual(payloads(events, "ContentPart"), [{ type: "text", text: "signed in and answering" }]);
  } finally {
    await session.close();
  }
  const chats = account.requests.filter((r) => r.url === "/v1/chat/completions");
  assert.equal(chats.length, 1);
  assert.equal(JSON.parse(chats[0].body).model, "kimi-for-coding");

  assert.deepEqual(await logout({ executable: BIN, env }), { success: true });
  assert.equal(isLoggedIn(h.share), false);
  assert.deepEqual(parseConfig(h.share).models, []);
});

test("a login the account server refuses reports the error", async () => {
  const down = await mockServer(() => ({ status: 503, json: { error: "maintenance" } }));
  after(down.close);
  const result = await login({ executable: BIN, env: { ...env, KIMI_CODE_OAUTH_HOST: down.url } });
  assert.equal(result.success, false);
  assert.match(result.error, /^\{"type": "error", "message": "Login failed: Device authorization failed: /);
});
