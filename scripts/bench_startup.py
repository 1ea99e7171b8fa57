#!/usr/bin/env python3
"""Time to answer `initialize` and idle resident memory: kimi-agent beside the Python reference.

    python3 scripts/bench_startup.py [--runs N] [--ours PATH] [--reference CMD]

Each run spawns the server in a fresh temporary HOME/KIMI_SHARE_DIR with a `_scripted_echo` config, writes
`initialize` at once, and measures the wall time from spawn until the response line arrives; then, with the
process idle, it reads VmRSS from /proc/<pid>/status. The median and range over the runs are printed as a
Markdown table (paste it into docs/benchmarks.md). `--reference ''` skips the reference.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REFERENCE = str(ROOT.parent / "shared" / "tools" / "kimi-reference")


def make_home(tmp: Path, scripts: list[str] = ("text: hello",), extra_config: dict | None = None,
              max_context_size: int = 100000) -> tuple[dict, list[str]]:
    """A fresh HOME, share dir and work dir under `tmp`, and a `_scripted_echo` config that answers each
    model call with the next of `scripts` (echo DSL). `extra_config` is merged into the config's top level.
    Returns the environment and the `--wire ...` arguments, the same for kimi-agent and the reference."""
    (tmp / "home" / ".kimi").mkdir(parents=True)
    (tmp / "work").mkdir()
    scripts_path = tmp / "scripts.json"
    scripts_path.write_text(json.dumps(list(scripts)))
    config = tmp / "config.json"
    config.write_text(json.dumps({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo",
                                "max_context_size": max_context_size}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts_path)}}},
        **(extra_config or {}),
    }))
    env = dict(os.environ, HOME=str(tmp / "home"), KIMI_SHARE_DIR=str(tmp / "home" / ".kimi"))
    # The reference launcher keeps its virtualenv under $HOME unless told where: keep using the real one.
    env.setdefault("KIMI_REFERENCE_HOME", str(Path.home() / ".cache" / "kimi-reference"))
    args = ["--wire", "--config-file", str(config), "--work-dir", str(tmp / "work")]
    return env, args


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident memory of `pid` and all its descendants (the reference may fork helpers); `field` may name
    another /proc/PID/status figure in kB, such as VmHWM (peak resident memory)."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
            pids.extend(int(c) for c in children)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def smaps_kib(pid: int, field: str = "Anonymous") -> int:
    """A /proc/PID/smaps_rollup figure of `pid` and its descendants. `Anonymous` is the heap and stacks,
    what each further session costs (the binary's code and other file pages are shared); `Pss` counts
    shared pages divided among the processes that map them."""
    total = 0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
            pids.extend(int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total


def run_once(command: list[str]) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        env, args = make_home(Path(tmp))
        request = json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                              "params": {"protocol_version": "1.10"}}) + "\n"
        start = time.perf_counter()
        proc = subprocess.Popen(command + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, text=True)
        proc.stdin.write(request)
        proc.stdin.flush()
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("id") == "init":
                break
        elapsed = time.perf_counter() - start
        time.sleep(0.5)  # let the process settle into idle before reading its memory
        rss = rss_kib(proc.pid)
        anon = smaps_kib(proc.pid)
        proc.stdin.close()
        proc.wait(timeout=30)
        return elapsed, rss, anon


def measure(name: str, command: list[str], runs: int) -> dict:
    samples = [run_once(command) for _ in range(runs)]
    times = [s[0] * 1000 for s in samples]
    rss = [s[1] / 1024 for s in samples]
    anon = [s[2] / 1024 for s in samples]
    return {"name": name, "ms": statistics.median(times), "ms_min": min(times), "ms_max": max(times),
            "mb": statistics.median(rss), "anon_mb": statistics.median(anon)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ours", default=str(ROOT / "target" / "release" / "kimi-agent"))
    parser.add_argument("--reference", default=DEFAULT_REFERENCE)
    parser.add_argument("--reference-runs", type=int, default=3)
    opts = parser.parse_args()
    if not Path(opts.ours).exists():
        print(f"{opts.ours} not found: cargo build --release -p kimi-agent", file=sys.stderr)
        return 2
    rows = [measure("kimi-agent", [opts.ours], opts.runs)]
    if opts.reference:
        rows.append(measure("reference (kimi --wire)", shlex.split(opts.reference), opts.reference_runs))
    print("| binary | initialize answered (median, min–max) | idle RSS (median) |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['ms']:.1f} ms ({r['ms_min']:.1f}–{r['ms_max']:.1f}) | {r['mb']:.1f} MB |")
    if len(rows) == 2:
        print(f"\nratio: {rows[1]['ms'] / rows[0]['ms']:.0f}x faster to answer, "
              f"{rows[1]['mb'] / rows[0]['mb']:.0f}x less memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
