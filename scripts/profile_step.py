#!/usr/bin/env python3
"""Instructions and system calls per agent step, independent of the machine's load: the proof for a change
on the hot path (docs/benchmarks.md, "Profiles").

    scripts/profile_step.py [--binary PATH] [--scenario steps|parallel|events|startup|replay] [--n N]
                            [--tool callgrind|strace|perf] [--top K]

Runs the binary (default target/profiling/kimi-agent: `cargo build --profile profiling -p kimi-agent`)
under the tool twice, in a fresh home with a `_scripted_echo` config and `--yolo`: once with the work (N
sequential ReadFile steps, one step of 50 parallel ReadFiles, or one answer of N text parts) and once with
a text-only turn in its place. Both runs send `initialize`, a warm-up turn and then the measured turn,
and close stdin. What the work costs is the difference of the two runs, divided by the units of work:

- callgrind: instructions (Ir, all threads) per unit, and the functions that account for the difference
  (self cost), the profile of one unit. Instruction counts do not depend on the load of the machine.
- strace: system calls per unit (`strace -f -c`), futex wake-ups and waits included.
- perf: `perf record` of the work run only (sampled, so load-dependent), top symbols by self time.

`--scenario startup` runs one process that only answers `initialize` and exits, and reports totals.
`--scenario replay` replays a session whose wire.jsonl holds N MB (scripts/bench_replay.py's generator);
its baseline answers `initialize` only, and the unit is one MB replayed.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import bench_replay  # noqa: E402
import bench_startup  # noqa: E402

ROOT = SCRIPTS.parent
TIMEOUT = 1800.0


def tool_call(call_id: str, name: str, arguments: dict) -> str:
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(arguments)})


def scripts_for(scenario: str, n: int, work: bool) -> list[str]:
    """The model's answers: the warm-up turn, then the measured turn (or its text-only baseline)."""
    warm = ["text: done"]
    if not work or scenario == "startup":
        return warm + ["text: done"]
    if scenario == "steps":
        return warm + [tool_call(f"s{i}", "ReadFile", {"path": f"f{i:04}.txt"}) for i in range(n)] + ["text: done"]
    if scenario == "parallel":
        calls = "\n".join(tool_call(f"p{i}", "ReadFile", {"path": f"f{i:04}.txt"}) for i in range(50))
        return warm + [calls, "text: done"]
    if scenario == "events":
        return warm + ["\n".join(f"text: t{i} " for i in range(n))]
    raise SystemExit(f"unknown scenario {scenario}")


def units(scenario: str, n: int) -> int:
    return 1 if scenario == "parallel" else n


def wrapper(tool: str, out: Path) -> list[str]:
    if tool == "callgrind":
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no", "-q"]
    if tool == "strace":
        return ["strace", "-f", "-c", "-o", str(out)]
    if tool == "perf":
        return ["perf", "record", "-q", "-F", "4999", "-g", "-o", str(out), "--"]
    raise SystemExit(f"unknown tool {tool}")


def exchange(proc: subprocess.Popen, rid: str, method: str, params: dict) -> dict:
    line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n"
    proc.stdin.write(line.encode())
    proc.stdin.flush()
    marker = f'"id":"{rid}"'.encode()
    for raw in proc.stdout:
        # A cheap search first: a replay streams millions of lines that are not the answer.
        if rid.encode() in raw and marker in raw.replace(b" ", b""):
            message = json.loads(raw)
            if "error" in message:
                raise RuntimeError(f"{method} failed: {message['error']}")
            return message
    raise RuntimeError(f"the server closed stdout before answering {method}")


def run_replay(binary: Path, tool: str, size_mb: int, work: bool, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env, args, _, _ = bench_replay.write_session(Path(tmp), size_mb)
        proc = subprocess.Popen(wrapper(tool, out) + [str(binary), *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        try:
            exchange(proc, "init", "initialize", {"protocol_version": "1.10"})
            if work:
                exchange(proc, "replay", "replay", {})
            proc.stdin.close()
            proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run(binary: Path, tool: str, scenario: str, n: int, work: bool, out: Path) -> None:
    if scenario == "replay":
        run_replay(binary, tool, n, work, out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env, args = bench_startup.make_home(Path(tmp), scripts_for(scenario, n, work),
                                            {"loop_control": {"max_steps_per_turn": max(n + 10, 100)}},
                                            max_context_size=100_000_000)
        body = "".join(f"line {i}: the quick brown fox jumps over the lazy dog {i * 7}\n" for i in range(12))
        for i in range(max(n, 50)):
            (Path(tmp) / "work" / f"f{i:04}.txt").write_text(body)
        proc = subprocess.Popen(wrapper(tool, out) + [str(binary), *args, "--yolo"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        try:
            exchange(proc, "init", "initialize", {"protocol_version": "1.10"})
            if scenario != "startup":
                exchange(proc, "warm", "prompt", {"user_input": "warm up"})
                exchange(proc, "work", "prompt", {"user_input": "work"})
            proc.stdin.close()
            proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# ------------------------------------------------------------------------------------------- callgrind

def callgrind_functions(out: Path) -> tuple[int, dict[str, int]]:
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no", "--threshold=100", str(out)],
                          capture_output=True, text=True, check=True).stdout
    total = 0
    functions: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)\s*$", line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        name = m.group(2)
        if name.startswith("PROGRAM TOTALS"):
            total = count
            continue
        # `file:function [object]`: the function is what stays the same between runs.
        name = re.sub(r"\s+\[[^\]]*\]$", "", name)
        name = name.split(":", 1)[1] if ":" in name and not name.startswith("???:") else name.removeprefix("???:")
        functions[name] = functions.get(name, 0) + count
    return total, functions


def short(name: str, width: int = 110) -> str:
    # Rust symbols carry long generic paths; the tail names the function.
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    return name if len(name) <= width else "…" + name[-(width - 1):]


def report_callgrind(binary: Path, scenario: str, n: int, top: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work_out, base_out = Path(tmp) / "work.cg", Path(tmp) / "base.cg"
        run(binary, "callgrind", scenario, n, True, work_out)
        work_total, work_fns = callgrind_functions(work_out)
        if scenario == "startup":
            print(f"startup: {work_total:,} instructions (initialize, then EOF and exit)")
            print_top(sorted(work_fns.items(), key=lambda kv: -kv[1])[:top], 1, "instructions")
            return
        run(binary, "callgrind", scenario, n, False, base_out)
        base_total, base_fns = callgrind_functions(base_out)
    per = units(scenario, n)
    print(f"{scenario} (n={n}): {work_total:,} - {base_total:,} instructions = "
          f"{(work_total - base_total) / per:,.0f} per unit")
    diff = {k: work_fns.get(k, 0) - base_fns.get(k, 0) for k in set(work_fns) | set(base_fns)}
    print_top(sorted(diff.items(), key=lambda kv: -kv[1])[:top], per, "instructions per unit",
              total=work_total - base_total)


def print_top(rows: list[tuple[str, int]], per: int, what: str, total: int | None = None) -> None:
    print(f"\n| {what} (self) | share | function |\n|---:|---:|---|")
    for name, count in rows:
        share = f"{100 * count / total:.1f} %" if total else ""
        print(f"| {count / per:,.0f} | {share} | `{short(name)}` |")


# ---------------------------------------------------------------------------------------------- strace

def strace_counts(out: Path) -> dict[str, int]:
    counts = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(fields) >= 5 and fields[3].isdigit() and not fields[-1].startswith("total"):
            counts[fields[-1]] = int(fields[3])
    return counts


def report_strace(binary: Path, scenario: str, n: int, top: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work_out, base_out = Path(tmp) / "work.st", Path(tmp) / "base.st"
        run(binary, "strace", scenario, n, True, work_out)
        work = strace_counts(work_out)
        if scenario == "startup":
            print(f"startup: {sum(work.values()):,} system calls")
            for name, count in sorted(work.items(), key=lambda kv: -kv[1])[:top]:
                print(f"| {count} | {name} |")
            return
        run(binary, "strace", scenario, n, False, base_out)
        base = strace_counts(base_out)
    per = units(scenario, n)
    diff = {k: work.get(k, 0) - base.get(k, 0) for k in set(work) | set(base)}
    print(f"{scenario} (n={n}): {sum(diff.values()) / per:.1f} system calls per unit\n")
    print("| calls per unit | system call |\n|---:|---|")
    for name, count in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        if count > 0:
            print(f"| {count / per:.2f} | {name} |")


# ------------------------------------------------------------------------------------------------ perf

def report_perf(binary: Path, scenario: str, n: int, top: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "perf.data"
        run(binary, "perf", scenario, n, True, out)
        text = subprocess.run(["perf", "report", "-i", str(out), "--no-children", "--stdio", "-g", "none",
                               "--percent-limit", "0.5", "--sort", "dso,sym"],
                              capture_output=True, text=True, check=True).stdout
    rows = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    print(f"{scenario} (n={n}), the whole run, sampled:\n")
    print("\n".join(rows[:top]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
                                                / "profiling" / "kimi-agent"))
    parser.add_argument("--scenario", default="steps", choices=["steps", "parallel", "events", "startup", "replay"])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--tool", default="callgrind", choices=["callgrind", "strace", "perf"])
    parser.add_argument("--top", type=int, default=25)
    opts = parser.parse_args()
    binary = Path(opts.binary)
    if not binary.exists():
        sys.exit(f"{binary} not found: cargo build --profile profiling -p kimi-agent")
    report = {"callgrind": report_callgrind, "strace": report_strace, "perf": report_perf}[opts.tool]
    report(binary, opts.scenario, opts.n, opts.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
