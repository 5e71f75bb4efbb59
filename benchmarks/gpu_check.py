"""The series on a CUDA GPU, in one run: what a maintainer with a lab GPU checks.

    python benchmarks/gpu_check.py [--out FOLDER] [--skip notebooks,throughput,...]

1. the CUDA tests (tests/test_cuda.py: both attention paths in fp32 and bf16, cached
   decoding, checkpoints moved between GPU and CPU, torch.compile without recompiles);
2. every notebook executed as a script with the GPU visible (the notebooks run on the CPU
   unless they pick a device; the trainer picks the GPU);
3. the training throughput (benchmarks/train_throughput.py --device cuda) at the benchmark
   size and at the base size, fp32, TF32 and bf16, eager and compiled;
4. the date task trained from the command line on the GPU to at least 99 % exact match, timed.

Each step's output goes to FOLDER/<step>.log; a table of the steps, their status and time
is printed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(
    name: str,
    command: list,
    out: Path,
    cwd: Path = ROOT,
    timeout: int = 300,
    env: dict | None = None,
) -> tuple:
    start = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        log.write(" ".join(command) + "\n")
        log.flush()
        try:
            code = subprocess.run(
                command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = time.perf_counter() - start
    tail = (out / f"{name}.log").read_text(errors="replace").splitlines()[-3:]
    print(f"{name}: {code} in {seconds:.0f} s | {' / '.join(tail)[-300:]}", flush=True)
    return name, code, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    p.add_argument("--skip", default="", help="comma-separated steps to leave out")
    p.add_argument(
        "--scripts",
        type=Path,
        default=None,
        help="the notebooks as scripts (jupyter nbconvert --to script), run from "
        "notebooks/; default: convert them here",
    )
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    py = sys.executable
    results = []
    import torch

    print(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}",
        flush=True,
    )
    if "tests" not in skip:
        results.append(
            run(
                "tests",
                [
                    py,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-o",
                    "addopts=",
                    "tests/test_cuda.py",
                ],
                args.out,
            )
        )
    if "notebooks" not in skip:
        scripts = args.scripts or args.out / "scripts"
        if args.scripts is None:
            subprocess.run(
                [
                    py,
                    "-m",
                    "jupyter",
                    "nbconvert",
                    "--to",
                    "script",
                    "--output-dir",
                    str(scripts),
                    *map(str, sorted((ROOT / "notebooks").glob("*.ipynb"))),
                ],
                check=True,
                capture_output=True,
            )
        env = {**os.environ, "MPLBACKEND": "Agg"}
        for nb in sorted(Path(scripts).resolve().glob("*.py")):
            results.append(
                run(f"nb-{nb.stem[:2]}", [py, str(nb)], args.out, ROOT / "notebooks", env=env)
            )
    if "throughput" not in skip:
        results.append(
            run(
                "throughput",
                [py, "benchmarks/train_throughput.py", "--device", "cuda"],
                args.out,
                timeout=420,
            )
        )
    if "dates" not in skip:  # on a GPU, larger batches: 100 % in about a minute on an H200
        flags = "--task dates --device cuda --d-model 64 --d-ff 256 --heads 4 --layers 2 "
        flags += "--dropout 0.0 --max-tokens 4000 --warmup 400 --lr-factor 1 --steps 3000 "
        flags += "--eval-every 1000 --eval-limit 300 --average-last 5 --no-progress --force"
        command = [py, "-m", "transformer_lib.train", *flags.split(), "--out", str(args.out)]
        results.append(run("dates", command, args.out))
    print("\n| step | status | seconds |\n|---|---|--:|")
    for name, code, seconds in results:
        print(f"| {name} | {code} | {seconds:.0f} |")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
