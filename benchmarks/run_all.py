"""Run every benchmark one after the other and print their tables.

    python benchmarks/run_all.py                 # full run (under 10 minutes on 2 cores)
    python benchmarks/run_all.py --quick         # smoke test
    python benchmarks/run_all.py --device cuda   # on a GPU

Extra arguments (--quick, --device, --threads) are passed on to every script.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ("train_throughput.py", "decode_cache.py", "attention_memory.py", "scaling.py")


def main() -> int:
    extra = sys.argv[1:]
    if {"-h", "--help"} & set(extra):
        print(__doc__)
        return 0
    start = time.perf_counter()
    for script in SCRIPTS:
        print(f"\n## {script} {' '.join(extra)}\n", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / script), *extra])
        print(f"\n({script}: {time.perf_counter() - t0:.0f} s)", flush=True)
        if code:
            return code
    print(f"\nAll benchmarks: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
