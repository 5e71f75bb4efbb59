"""DDP smoke test: two CPU processes (gloo) launched by torchrun train for a few steps."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from transformer_lib.training.distributed import DistContext, shard
from transformer_lib.training.schedule import noam_lr

ROOT = Path(__file__).resolve().parents[1]
needs_gloo = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()),
    reason="torch.distributed with the gloo backend is not available in this PyTorch build",
)


def test_shard_gives_each_rank_a_disjoint_equal_share():
    items = list(range(11))
    shares = [shard(items, DistContext(rank=r, world_size=3)) for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]  # the 2 left over are dropped
    assert shard(items, DistContext()) == items
    with pytest.raises(ValueError, match="2 processes"):
        shard([0], DistContext(rank=0, world_size=2))


@needs_gloo
def test_torchrun_two_cpu_processes(tmp_path):
    out = tmp_path / "ddp"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--standalone",
        "-m",
        "transformer_lib.train",
        "--task",
        "dates",
        "--n-train",
        "300",
        "--n-valid",
        "10",
        "--n-test",
        "10",
        "--d-model",
        "32",
        "--d-ff",
        "64",
        "--max-tokens",
        "400",
        "--steps",
        "3",
        "--cooldown",  # its factor is agreed on by both processes
        "0.5",
        "--eval-limit",
        "10",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["checkpoint.pt"]  # rank 0 only, no temporary left
    ck = torch.load(out / "checkpoint.pt", weights_only=True)
    assert ck["step"] == 3 and len(ck["history"]["loss"]) == 3
    # step 3 of 3 runs after 2/3 of the run: the cool-down's factor is (1 - 2/3) / 0.5
    expected = noam_lr(3, 32, ck["settings"]["warmup"]) * (1 - 2 / 3) / 0.5
    assert ck["history"]["lr"][2] == pytest.approx(expected)
    assert proc.stdout.count("checkpoint:") == 1  # only rank 0 prints
