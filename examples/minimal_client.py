#!/usr/bin/env python3
"""A minimal Wire 1.10 client: starts kimi-agent, sends one prompt, prints the stream, approves requests.

    python3 examples/minimal_client.py BINARY [AGENT ARGS...] -- "your prompt"

Everything before `--` goes to the agent (after `--wire`); the text after it is the prompt.
Only the standard library is used.
"""
import json
import subprocess
import sys


def main() -> int:
    if "--" not in sys.argv[2:]:
        print(__doc__, file=sys.stderr)
        return 2
    split = sys.argv.index("--", 2)
    binary, agent_args, prompt = sys.argv[1], sys.argv[2:split], " ".join(sys.argv[split + 1 :])
    proc = subprocess.Popen(
        [binary, "--wire", *agent_args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
          "params": {"protocol_version": "1.10", "client": {"name": "minimal-client", "version": "1"},
                     "capabilities": {"supports_question": True}}})
    send({"jsonrpc": "2.0", "id": "prompt", "method": "prompt", "params": {"user_input": prompt}})
    status = 1
    for line in proc.stdout:
        message = json.loads(line)
        method = message.get("method")
        if method == "event":
            event = message["params"]
            print(f"event   {event['type']:<14} {json.dumps(event['payload'])}")
        elif method == "request":
            request = message["params"]
            payload = request["payload"]
            print(f"request {request['type']:<14} {json.dumps(payload)}")
            if request["type"] == "ApprovalRequest":
                result = {"request_id": payload["id"], "response": "approve"}
            elif request["type"] == "QuestionRequest":
                result = {"request_id": payload["id"], "answers": {}}
            elif request["type"] == "HookRequest":
                result = {"request_id": payload["id"], "action": "allow", "reason": ""}
            else:  # ToolCallRequest: this client has no tools of its own
                result = {"tool_call_id": payload["id"], "return_value": {
                    "is_error": True, "output": "", "message": "no client tools", "display": []}}
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif message.get("id") == "init":
            server = message.get("result", {}).get("server", {})
            print(f"server  {server.get('name')} {server.get('version')}")
        elif message.get("id") == "prompt":
            print(f"result  {json.dumps(message.get('result') or message.get('error'))}")
            status = 0 if "result" in message else 1
            break
    proc.stdin.close()
    proc.wait(timeout=10)
    return status


if __name__ == "__main__":
    sys.exit(main())
