"""Keep what translates: ``python -m transformer_lib.export CHECKPOINT OUT``.

Writes the model's configuration, its weights (float16 by default) and the tokenizer of a
training checkpoint, with its step, history and command, but no optimizer or random
states: a small file for translating and sharing, read by ``load_model`` and
``python -m transformer_lib.translate``; it cannot be resumed, so it never replaces a
training checkpoint.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    import torch

    from .checkpoint import CheckpointError, export_for_inference

    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    p = argparse.ArgumentParser(prog="python -m transformer_lib.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", type=Path, help="a checkpoint of python -m transformer_lib.train")
    p.add_argument("out", type=Path, help="the file to write")
    p.add_argument("--dtype", choices=list(dtypes), default="float16",
                   help="how the weights are stored (default float16: half the size)")
    p.add_argument("--force", action="store_true", help="overwrite OUT (never a training "
                   "checkpoint)")
    args = p.parse_args(argv)
    if not args.checkpoint.is_file():
        p.error(f"checkpoint: no such file: {args.checkpoint}")
    if args.out.is_dir():
        p.error(f"out: {args.out} is a folder; give the file to write")
    if args.out.exists() and not args.force:
        p.error(f"out: {args.out} already exists: pass --force to overwrite it")
    try:
        export_for_inference(args.checkpoint, args.out, dtypes[args.dtype])
    except CheckpointError as e:
        p.error(str(e))
    except OSError as e:
        p.error(f"out: cannot write {args.out} ({e.strerror})")
    size = args.out.stat().st_size / 2**20
    print(f"{args.out}: {size:.1f} MB ({args.dtype} weights and the tokenizer, no optimizer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
