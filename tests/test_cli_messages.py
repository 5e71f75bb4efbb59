"""What the command lines print around their work: warnings in one line, divergence named
with the flags that cure it."""

import subprocess
import sys
from pathlib import Path

import torch

from transformer_lib.training import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_a_checkpoint_without_checksum_is_one_warning_line(tmp_path):
    state = load_checkpoint(ROOT / "checkpoints" / "dates.pt")  # verified, checksum removed
    torch.save(state, tmp_path / "old.pt")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "transformer_lib.translate",
            "--checkpoint",
            str(tmp_path / "old.pt"),
        ],
        input="5 mars 2021\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2021-03-05"
    lines = [line for line in out.stderr.splitlines() if "checksum" in line]
    assert (
        len(lines) == 1 and lines[0].startswith("warning: ") and "old.pt carries no" in lines[0]
    ), out.stderr
    assert "UserWarning" not in out.stderr and "warnings.warn" not in out.stderr
