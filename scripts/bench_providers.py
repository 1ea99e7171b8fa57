#!/usr/bin/env python3
"""Local mocks of the model APIs for the provider rows of scripts/bench (issue 14).

One threaded HTTP server speaks every API a provider type uses, each in its own streaming shape:
chat completions (`kimi`), Anthropic's Messages (`anthropic`), OpenAI's Responses (`openai_responses`),
Gemini's `streamGenerateContent?alt=sse` (`gemini`), and the same through Vertex AI (`vertexai`, with an
OAuth token endpoint for a test service account). Each answer is decided by the request: a prompt that
carries `TOOL_MARKER` gets a ReadFile call of `a.txt` first, and the request carrying its result gets a
short text; any other prompt gets a short text at once. `make_home` writes a config for one provider type pointing at
the mock, the same for kimi-agent and the reference.

    python3 scripts/bench_providers.py      # serve the mock and print its URL (for trying a client by hand)
"""
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_KEY = ROOT / "crates/kimi-llm/tests/fixtures/google/test_rsa_key.pem"

PROVIDERS = ["kimi", "anthropic", "openai_responses", "gemini", "vertexai"]
MODELS = {"kimi": "kimi-k2-turbo-preview", "anthropic": "claude-sonnet-4-5", "openai_responses": "gpt-5.1-codex",
          "gemini": "gemini-2.5-pro", "vertexai": "gemini-2.5-pro"}
ANSWER = "The file says hi."


def _sse(events: list[tuple[str, dict]], crlf: bool = False) -> bytes:
    end = "\r\n\r\n" if crlf else "\n\n"
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}{end}")
    return "".join(out).encode()


# The marker a prompt carries to get a tool call first (plain words could appear in injected reminders).
TOOL_MARKER = "BENCH_TOOL"
TEXT_PROMPT = "Say hello."
TOOL_PROMPT = f"Read a.txt ({TOOL_MARKER})."


def _wants_tool(text: str) -> bool:
    return TOOL_MARKER in text


# Per API: (does the request end with a tool result?, the last user text) and the two answers.

def _kimi_state(body: dict) -> tuple[bool, str]:
    last = body["messages"][-1]
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return last["role"] == "tool", text


def _kimi_answer(call: bool, path: str) -> bytes:
    def chunk(delta, finish=None, usage=None):
        c = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": MODELS["kimi"],
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            c["choices"][0]["usage"] = usage
        return "", c
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    if call:
        events = [chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                             "function": {"name": "ReadFile", "arguments": ""}}]}),
                  chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps({"path": path})}}]}),
                  chunk({}, "tool_calls", usage)]
    else:
        events = [chunk({"role": "assistant", "content": "The file"}), chunk({"content": " says hi."}),
                  chunk({}, "stop", usage)]
    return _sse(events) + b"data: [DONE]\n\n"


def _anthropic_state(body: dict) -> tuple[bool, str]:
    last = body["messages"][-1]
    blocks = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    return any(b.get("type") == "tool_result" for b in blocks), json.dumps(blocks)


def _anthropic_answer(call: bool, path: str) -> bytes:
    start = ("message_start", {"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "content": [], "model": MODELS["anthropic"],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}})
    if call:
        blocks = [
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_bench", "name": "ReadFile", "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps({"path": path})}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "tool_use"
    else:
        blocks = [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "The file"}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": " says hi."}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "end_turn"
    end = [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                              "usage": {"output_tokens": 10}}),
           ("message_stop", {"type": "message_stop"})]
    return _sse([start, *blocks, *end])


def _responses_state(body: dict) -> tuple[bool, str]:
    last = body["input"][-1]
    return last.get("type") == "function_call_output", json.dumps(last)


def _responses_answer(call: bool, path: str) -> bytes:
    events = [("response.created", {"type": "response.created", "response": {"id": "resp_bench", "output": []}})]
    if call:
        arguments = json.dumps({"path": path})
        item = {"id": "fc_bench", "type": "function_call", "call_id": "call_bench", "name": "ReadFile",
                "arguments": ""}
        events += [
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                        "item_id": "fc_bench", "output_index": 0, "delta": arguments}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                           "item": {**item, "arguments": arguments, "status": "completed"}}),
        ]
    else:
        item = {"id": "msg_bench", "type": "message", "role": "assistant", "content": []}
        events += [
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_bench",
                                            "output_index": 0, "content_index": 0, "delta": "The file"}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_bench",
                                            "output_index": 0, "content_index": 0, "delta": " says hi."}),
        ]
    events.append(("response.completed", {"type": "response.completed", "response": {
        "id": "resp_bench", "status": "completed", "output": [],
        "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}}))
    return _sse(events)


def _gemini_state(body: dict) -> tuple[bool, str]:
    last = body["contents"][-1]
    return any("functionResponse" in p for p in last["parts"]), json.dumps(last["parts"])


def _gemini_answer(call: bool, path: str) -> bytes:
    usage = {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
    if call:
        parts = [[{"functionCall": {"name": "ReadFile", "args": {"path": path}}}]]
    else:
        parts = [[{"text": "The file"}], [{"text": " says hi."}]]
    events = []
    for i, p in enumerate(parts):
        candidate = {"content": {"parts": p, "role": "model"}, "index": 0}
        chunk = {"candidates": [candidate], "modelVersion": MODELS["gemini"], "responseId": "resp-bench"}
        if i == len(parts) - 1:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage
        events.append(("", chunk))
    return _sse(events, crlf=True)


class MockApis:
    """The server; `base_url(provider)` is what a config names; `requests` counts model calls."""

    def __init__(self, work: Path):
        self.path = str(work / "a.txt")
        self.requests = 0
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # Headers and body are two writes: without this, Nagle's algorithm holds the body back
                # until the client's delayed ACK (40 ms on Linux), which would dominate every figure.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                route = self.path.split("?")[0]
                if route == "/token":
                    return self._send(200, "application/json", json.dumps(
                        {"access_token": "ya29.bench", "expires_in": 3600, "token_type": "Bearer"}).encode())
                body = json.loads(raw or b"{}")
                if route.endswith("/chat/completions"):
                    state, answer = _kimi_state, _kimi_answer
                elif route.endswith("/messages"):
                    state, answer = _anthropic_state, _anthropic_answer
                elif route.endswith("/responses"):
                    state, answer = _responses_state, _responses_answer
                elif route.endswith(":streamGenerateContent") or route == "/":
                    # The reference's `vertexai` posts to the bare base URL when it is not a Google host.
                    state, answer = _gemini_state, _gemini_answer
                else:
                    return self._send(404, "text/plain", f"no such route: {self.path}".encode())
                mock.requests += 1
                answered, text = state(body)
                call = not answered and _wants_tool(text)
                self._send(200, "text/event-stream", answer(call, mock.path))

            def _send(self, status: int, kind: str, data: bytes):
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def base_url(self, provider: str) -> str:
        return f"{self.root}/v1" if provider in ("kimi", "openai_responses") else self.root

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def make_home(tmp: Path, mock: MockApis, provider: str) -> tuple[dict, list[str]]:
    """A fresh HOME, share dir and work dir (holding `a.txt`) under `tmp`, and a config whose only model
    uses `provider` at the mock. Returns the environment and the `--wire ...` arguments."""
    (tmp / "home" / ".kimi").mkdir(parents=True)
    work = tmp / "work"
    work.mkdir()
    (work / "a.txt").write_text("hi\n")
    entry = {"type": provider, "base_url": mock.base_url(provider), "api_key": "sk-bench"}
    if provider == "vertexai":
        key = tmp / "service-account.json"
        key.write_text(json.dumps({
            "type": "service_account", "project_id": "bench", "private_key_id": "k1",
            "private_key": TEST_KEY.read_text(), "client_email": "bench@bench.iam.gserviceaccount.com",
            "client_id": "1", "token_uri": f"{mock.root}/token"}))
        entry["api_key"] = ""
        entry["env"] = {"GOOGLE_APPLICATION_CREDENTIALS": str(key), "GOOGLE_CLOUD_PROJECT": "bench",
                        "GOOGLE_CLOUD_LOCATION": "us-central1"}
    config = tmp / "config.json"
    config.write_text(json.dumps({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": MODELS[provider], "max_context_size": 200000}},
        "providers": {"p": entry},
    }))
    env = dict(os.environ, HOME=str(tmp / "home"), KIMI_SHARE_DIR=str(tmp / "home" / ".kimi"))
    for var in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                "KIMI_API_KEY", "KIMI_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS"):
        env.pop(var, None)
    env.setdefault("KIMI_REFERENCE_HOME", str(Path.home() / ".cache" / "kimi-reference"))
    args = ["--wire", "--config-file", str(config), "--work-dir", str(work)]
    return env, args


if __name__ == "__main__":
    import tempfile
    import time
    with tempfile.TemporaryDirectory() as d:
        mock = MockApis(Path(d))
        print(f"serving every API at {mock.root}; Ctrl-C to stop")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            mock.close()
