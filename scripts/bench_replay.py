#!/usr/bin/env python3
"""Replay throughput and memory: stream a large recorded session to a client that reads as fast as it can.

    python3 scripts/bench_replay.py [--size-mb 100] [--runs 3] [--ours PATH] [--keep DIR]

Writes a session whose wire.jsonl holds `--size-mb` MB of realistic turns (text and thinking parts of
varied length, tool calls, tool results with large outputs, status updates), written the way the reference
writes them (`", "` / `": "` separators, non-ASCII kept). Then, per run, it starts
`kimi-agent --wire --session ID`, sends `replay`, and reads stdout in 1 MiB chunks without parsing until
the `replay` response arrives. It reports the wall time from sending `replay` to its response, MB/s of
wire.jsonl replayed, events/s, and the server's peak resident memory (VmHWM) next to its resident
memory before the replay (VmRSS after `initialize`): flat memory means the peak does not grow with the
file. The best run is reported (the median too). Build first: `cargo build --release -p kimi-agent`.
"""
import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION_ID = "bench-replay"
WORDS = ("the agent reads files and edits code while the user waits; "
         "résumé naïve façade 日本語 テキスト emoji 🚀 and \"quotes\" \\ backslashes\n").split(" ")


def text(rng: random.Random, n: int) -> str:
    out = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def turn(rng: random.Random, ts: float) -> list[dict]:
    """One recorded turn: two steps, a tool call with its result, as our recorder and the reference write it."""
    status = {"context_usage": 0.12, "context_tokens": 12000, "max_context_tokens": 100000,
              "token_usage": {"input_other": 900, "output": 300, "input_cache_read": 11000,
                              "input_cache_creation": 0},
              "message_id": "msg-1", "plan_mode": False, "mcp_status": None}
    call_id = f"tc-{rng.randrange(10**9)}"
    messages = [
        ("TurnBegin", {"user_input": text(rng, rng.randrange(20, 400))}),
        ("StepBegin", {"n": 1}),
        ("ContentPart", {"type": "think", "think": text(rng, rng.randrange(100, 2000)), "encrypted": None}),
        ("ContentPart", {"type": "text", "text": text(rng, rng.randrange(50, 3000))}),
        ("ToolCall", {"type": "function", "id": call_id,
                      "function": {"name": "Shell", "arguments": json.dumps({"command": "ls -la src"})},
                      "extras": None}),
        ("StatusUpdate", status),
        ("ToolResult", {"tool_call_id": call_id,
                        "return_value": {"is_error": False, "output": text(rng, rng.randrange(100, 8000)),
                                         "message": "Command executed successfully.", "display": [],
                                         "extras": None}}),
        ("StepBegin", {"n": 2}),
        ("ContentPart", {"type": "text", "text": text(rng, rng.randrange(50, 1500))}),
        ("StatusUpdate", status),
        ("TurnEnd", {}),
    ]
    return [{"timestamp": ts + i * 0.001, "message": {"type": kind, "payload": payload}}
            for i, (kind, payload) in enumerate(messages)]


def write_session(root: Path, size_mb: int) -> tuple[dict, list[str], Path, int]:
    home = root / "home"
    share = home / ".kimi"
    work = root / "work"
    work.mkdir(parents=True)
    share.mkdir(parents=True)
    scripts = root / "scripts.json"
    scripts.write_text(json.dumps(["text: unused"]))
    config = root / "config.json"
    config.write_text(json.dumps({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts)}}},
    }))
    session = share / "sessions" / hashlib.md5(str(work).encode()).hexdigest() / SESSION_ID
    session.mkdir(parents=True)
    (session / "context.jsonl").write_text(json.dumps({"role": "_system_prompt", "content": "bench"}) + "\n")
    wire = session / "wire.jsonl"
    rng = random.Random(42)
    target = size_mb * 1_000_000
    records = 0
    with wire.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"type": "metadata", "protocol_version": "1.10"}) + "\n")
        # A pool of distinct turns, written round-robin: realistic lines, fast generation.
        pool = ["".join(json.dumps(r, ensure_ascii=False) + "\n" for r in turn(rng, 1.7e9 + i))
                for i in range(200)]
        written = 0
        i = 0
        while written < target:
            block = pool[i % len(pool)]
            f.write(block)
            written += len(block.encode("utf-8"))
            records += block.count("\n")
            i += 1
    env = dict(os.environ, HOME=str(home), KIMI_SHARE_DIR=str(share))
    args = ["--wire", "--config-file", str(config), "--work-dir", str(work), "--session", SESSION_ID]
    return env, args, wire, records


def proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def read_until(fd: int, marker: bytes, pending: bytes) -> tuple[bytes, bytes, int]:
    """Reads stdout in 1 MiB chunks, without parsing, until a line holding `marker`.
    Returns that line, what followed it, and the bytes read."""
    total = 0
    data = pending
    while True:
        if marker in data:
            at = data.index(marker)
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            if end >= 0:
                return data[start:end], data[end + 1:], total
        else:
            # Only the unfinished last line can still grow into the answer.
            data = data[data.rfind(b"\n") + 1:]
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise RuntimeError("kimi-agent closed stdout before answering")
        total += len(chunk)
        data += chunk


def run_once(binary: str, env: dict, args: list[str]) -> dict:
    proc = subprocess.Popen([binary, *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    fd = proc.stdout.fileno()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocol_version":"1.10"}}\n')
    proc.stdin.flush()
    _, rest, _ = read_until(fd, b'"id":"init"', b"")
    rss_before = proc_kib(proc.pid, "VmRSS")
    start = time.perf_counter()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"replay-1","method":"replay","params":{}}\n')
    proc.stdin.flush()
    line, _, streamed = read_until(fd, b'"id":"replay-1"', rest)
    elapsed = time.perf_counter() - start
    peak = proc_kib(proc.pid, "VmHWM")
    proc.stdin.close()
    proc.wait(timeout=30)
    result = json.loads(line)["result"]
    return {"elapsed": elapsed, "result": result, "streamed": streamed, "rss_before": rss_before,
            "peak": peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ours", default=str(ROOT / "target" / "release" / "kimi-agent"))
    parser.add_argument("--keep", help="generate the session here and keep it")
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(opts.keep) if opts.keep else Path(tmp)
        t0 = time.perf_counter()
        env, args, wire, records = write_session(root, opts.size_mb)
        size = wire.stat().st_size
        print(f"wire.jsonl: {size / 1e6:.1f} MB, {records} records "
              f"(generated in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        runs = []
        for i in range(opts.runs):
            r = run_once(opts.ours, env, args)
            if r["result"] != {"status": "finished", "events": records, "requests": 0}:
                print(f"unexpected replay result: {r['result']} (expected {records} events)", file=sys.stderr)
                return 1
            print(f"run {i + 1}: {r['elapsed']:.3f} s, {size / 1e6 / r['elapsed']:.0f} MB/s, "
                  f"peak RSS {r['peak'] / 1024:.1f} MiB", file=sys.stderr)
            runs.append(r)
        best = min(runs, key=lambda r: r["elapsed"])
        median = statistics.median(r["elapsed"] for r in runs)
        print("| wire.jsonl | records | time (best / median) | MB/s (best / median) | events/s (best) "
              "| stdout streamed | RSS before | peak RSS |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {size / 1e6:.0f} MB | {records} | {best['elapsed']:.2f} s / {median:.2f} s "
              f"| {size / 1e6 / best['elapsed']:.0f} / {size / 1e6 / median:.0f} "
              f"| {records / best['elapsed']:,.0f} | {best['streamed'] / 1e6:.0f} MB "
              f"| {best['rss_before'] / 1024:.1f} MiB | {max(r['peak'] for r in runs) / 1024:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
