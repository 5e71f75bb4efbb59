"""Run every benchmark one after the other and print their tables.

    python benchmarks/run_all.py                 # full run (a few minutes on 2 cores)
    python benchmarks/run_all.py --short         # fewer repetitions: under 3 minutes on 2 cores
    python benchmarks/run_all.py --quick         # smoke test
    python benchmarks/run_all.py --device cuda   # on a GPU

Extra arguments (--quick, --device, --threads) are passed on to every script. The first
line names the machine: the CPU, PyTorch's CPU capability and whether it computes bf16
natively (where it does not, the bf16 rows are left out with a note).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

import common

HERE = Path(__file__).resolve().parent
SCRIPTS = ("train_throughput.py", "decode_cache.py", "attention_memory.py", "scaling.py")
SHORT = {
    "train_throughput.py": ["--presets", "d256", "--reps", "3"],  # per script, --short
    "decode_cache.py": ["--reps", "1", "--lengths", "32", "128"],
    "attention_memory.py": ["--lengths", "512", "1024", "2048", "4096"],
    "scaling.py": ["--reps", "1", "--lengths", "16", "64", "256", "--batches", "4", "16", "64"],
}


def main() -> int:
    extra = sys.argv[1:]
    if {"-h", "--help"} & set(extra):
        print(__doc__)
        return 0
    short = "--short" in extra
    extra = [a for a in extra if a != "--short"]
    device = torch.device(extra[extra.index("--device") + 1] if "--device" in extra else "cpu")
    print(common.machine_line(device), flush=True)
    start = time.perf_counter()
    for script in SCRIPTS:
        args = extra + (SHORT[script] if short else [])
        print(f"\n## {script} {' '.join(args)}\n", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / script), *args])
        print(f"\n({script}: {time.perf_counter() - t0:.0f} s)", flush=True)
        if code:
            return code
    print(f"\nAll benchmarks: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
