#!/usr/bin/env python3
"""Grep tool vs `rg` on a large tree: same patterns, same files, median of several warm runs.

Usage: scripts/bench_grep.py [DIR] [--runs N]

DIR defaults to ~/.cargo/registry/src (tens of thousands of files). Our side is the `Grep` tool run
in process by the `grep_bench` example (release build); the rg side runs `rg` with the flags the
reference's Grep passes (`--hidden`, VCS dirs excluded) for the same output mode. `rg` must be on
PATH: on Debian/Ubuntu, `apt-get install -y ripgrep`. Results are recorded in docs/benchmarks.md.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (label, pattern, Grep output_mode, rg mode flags)
CASES = [
    ("literal, files_with_matches", "serde::Deserialize", "files_with_matches", ["-l"]),
    ("regex, files_with_matches", r"fn [a-z_]+_unchecked\(", "files_with_matches", ["-l"]),
    ("regex, content -n", r"fn [a-z_]+_unchecked\(", "content", ["-n"]),
    ("literal, count_matches", "unsafe impl", "count_matches", ["-c"]),
]

VCS_GLOBS = [f"--glob=!{d}" for d in (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")]


def build() -> Path:
    subprocess.run(
        ["cargo", "build", "--release", "-p", "kimi-tools", "--example", "grep_bench"],
        cwd=ROOT,
        check=True,
    )
    return example_path()


def example_path() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "examples" / "grep_bench"


def time_rg(directory: Path, pattern: str, flags: list[str], runs: int) -> list[float]:
    cmd = ["rg", "--hidden", *VCS_GLOBS, *flags, "--", pattern, "."]
    subprocess.run(cmd, cwd=directory, stdout=subprocess.DEVNULL, check=False)  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, cwd=directory, stdout=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def time_ours(binary: Path, directory: Path, pattern: str, mode: str, runs: int) -> list[float]:
    out = subprocess.run(
        [str(binary), str(directory), pattern, mode, str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if report["is_error"]:
        sys.exit(f"Grep failed: {report['message']}")
    return report["times_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", nargs="?", default=str(Path.home() / ".cargo/registry/src"))
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    if shutil.which("rg") is None:
        sys.exit("rg not found on PATH; install it first (apt-get install -y ripgrep)")
    directory = Path(args.dir).resolve()
    files = sum(len(f) for _, _, f in os.walk(directory))
    rg_version = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    binary = build()
    print(f"tree: {directory} ({files} files); {rg_version}; {os.cpu_count()} CPUs; median of {args.runs} warm runs")
    print(f"{'case':32} {'Grep ms':>9} {'rg ms':>9} {'ratio':>6}")
    worst = 0.0
    for label, pattern, mode, flags in CASES:
        ours = statistics.median(time_ours(binary, directory, pattern, mode, args.runs))
        theirs = statistics.median(time_rg(directory, pattern, flags, args.runs))
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(f"{label:32} {ours:9.1f} {theirs:9.1f} {ratio:6.2f}")
    print(f"worst ratio: {worst:.2f} (target: <= 1.5)")


if __name__ == "__main__":
    main()
