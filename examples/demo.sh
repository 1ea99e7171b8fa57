#!/usr/bin/env bash
# A scripted kimi-agent session that needs no API key: the `_scripted_echo` provider plays two model
# replies (one that calls the Shell tool, one that answers), and this script plays the client.
#   ./examples/demo.sh            # builds the binary if needed, prints every protocol line
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${KIMI_AGENT_BIN:-$root/target/release/kimi-agent}"
if [ ! -x "$bin" ]; then
  # A first, optimized build takes several minutes: say so, and let cargo show its progress.
  echo "demo.sh: building kimi-agent (release, once; the first build takes a few minutes)..." >&2
  cargo build --release --manifest-path "$root/Cargo.toml" -p kimi-agent
  echo "demo.sh: built $bin" >&2
fi
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/work" "$tmp/home"
cat > "$tmp/scripts.json" <<'JSON'
["text: Let me look at the working directory.\ntool_call: {\"id\": \"tc-1\", \"name\": \"Shell\", \"arguments\": \"{\\\"command\\\": \\\"echo hello from the shell\\\"}\"}",
 "usage: input_other=120 output=12\ntext: The shell said hello. Done."]
JSON
cat > "$tmp/config.json" <<JSON
{"default_model": "demo",
 "models": {"demo": {"provider": "scripted", "model": "scripted_echo", "max_context_size": 100000}},
 "providers": {"scripted": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": "$tmp/scripts.json"}}}}
JSON
# The client approves every request, so the Shell call runs after an ApprovalRequest.
KIMI_SHARE_DIR="$tmp/home/.kimi" HOME="$tmp/home" python3 "$root/examples/minimal_client.py" "$bin" \
  --config-file "$tmp/config.json" --work-dir "$tmp/work" -- "Say hello through the shell."
