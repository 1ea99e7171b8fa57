#!/usr/bin/env python3
"""Heap growth per step, independent of the machine's load and of the allocator's page habits.

    scripts/heap_growth.py [BINARY]     (default target/release/kimi-agent; needs `heaptrack`)

Runs `scripts/bench`'s growth scenario (turns of 50 ReadFile steps, each a different small file) under
`heaptrack`, once with 2 turns and once with 20, and prints (peak heap of 20 − peak heap of 2) ÷ (18 × 50):
the bytes each further step keeps alive. `scripts/bench`'s growth row measures RSS instead, which moves in
pages and with the allocator's free lists, so single runs of it scatter by about ±0.5 KB per step.
"""
import importlib.machinery
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
_loader = importlib.machinery.SourceFileLoader("bench", str(SCRIPTS / "bench"))
bench = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench", _loader))
_loader.exec_module(bench)

STEPS = 50
UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def peak_heap(binary: str, turns: int, tmp: Path) -> float:
    out = tmp / f"heap-{turns}"
    bench.memory_growth(["heaptrack", "-o", str(out), binary], False, turns, STEPS)
    [data] = tmp.glob(f"heap-{turns}*")
    text = subprocess.run(["heaptrack_print", "-f", str(data), "-p", "0", "-a", "0", "-T", "0", "-l", "0",
                           "-n", "0"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"peak heap memory consumption: ([\d.]+)([KMG]?)", text)
    if not m:
        raise SystemExit(f"no peak in heaptrack_print's output:\n{text[-2000:]}")
    return float(m.group(1)) * UNITS[m.group(2)]


def main() -> int:
    binary = sys.argv[1] if len(sys.argv) > 1 else str(SCRIPTS.parent / "target" / "release" / "kimi-agent")
    with tempfile.TemporaryDirectory() as tmp:
        few, many = peak_heap(binary, 2, Path(tmp)), peak_heap(binary, 20, Path(tmp))
    print(f"peak heap: 2 turns {few / 1e6:.2f} MB, 20 turns {many / 1e6:.2f} MB; "
          f"{(many - few) / (18 * STEPS):,.0f} bytes per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
