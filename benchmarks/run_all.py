"""Run the main benchmarks one after the other, each in its own process, and print their tables.

    python benchmarks/run_all.py                 # full run (a few minutes on 2 cores)
    python benchmarks/run_all.py --short         # fewer repetitions: under 3 minutes on 2 cores
    python benchmarks/run_all.py --quick         # smoke test
    python benchmarks/run_all.py --device cuda   # on a GPU
    python benchmarks/run_all.py --scripts decode_cache.py scaling.py   # some of them

Other arguments (--quick, --device, --threads) are passed on to every script. The first
line names the machine: the CPU, PyTorch's CPU capability and whether it computes bf16
natively (where it does not, the bf16 rows are left out with a note).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import common

HERE = Path(__file__).resolve().parent
SCRIPTS = ("train_throughput.py", "decode_cache.py", "attention_memory.py", "scaling.py")
SHORT = {  # per script, with --short
    "train_throughput.py": ["--presets", "d256", "--reps", "3"],
    "decode_cache.py": ["--reps", "1", "--lengths", "32", "128"],
    "attention_memory.py": ["--lengths", "512", "1024", "2048", "4096"],
    "scaling.py": ["--reps", "1", "--lengths", "16", "64", "256", "--batches", "4", "16", "64"],
}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--short", action="store_true", help="fewer repetitions and sizes")
    p.add_argument("--scripts", nargs="+", choices=SCRIPTS, default=list(SCRIPTS))
    args, extra = p.parse_known_args(argv)
    device = common.check_device(
        extra[extra.index("--device") + 1] if "--device" in extra else "cpu"
    )
    print(common.machine_line(device), flush=True)
    start = time.perf_counter()
    for script in args.scripts:
        script_args = extra + (SHORT[script] if args.short else [])
        print(f"\n## {script} {' '.join(script_args)}\n", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / script), *script_args])
        print(f"\n({script}: {time.perf_counter() - t0:.0f} s)", flush=True)
        if code:
            return code
    print(f"\nAll benchmarks: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
