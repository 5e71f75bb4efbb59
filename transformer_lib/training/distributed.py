"""Several processes with PyTorch DDP, launched by ``torchrun`` (one process per device).

``torchrun --nproc_per_node=K -m transformer_lib.train ...`` starts K copies of the
program and sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the process
group reads them (``init_method="env://"``). Every process builds the same model, takes
its own share of the token batches, and ``DistributedDataParallel`` averages the
gradients during ``backward()``: each process then makes the same Adam step. Backend:
NCCL on CUDA, gloo on CPU. Only rank 0 writes checkpoints and prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Sequence, TypeVar

import torch
import torch.distributed as dist
from torch import nn

T = TypeVar("T")


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: its rank among ``world_size`` processes."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes files and logs."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when the environment describes more than one process (torchrun sets it)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_distributed(device_type: str = "cpu") -> DistContext:
    """Join the process group described by torchrun's environment variables.

    One process alone (no torchrun) gets a ``DistContext()`` of rank 0 in a world of 1.
    """
    if not launched_by_torchrun():
        return DistContext()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this PyTorch build has no torch.distributed")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, init_method="env://")
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank)


def shard(items: Sequence[T], ctx: DistContext) -> List[T]:
    """This rank's share, like ``DistributedSampler(drop_last=True)``: items rank,
    rank + K, rank + 2K, ...; the tail that does not divide evenly is dropped, so every
    rank makes the same number of steps (a rank with one batch less would hang the others
    in their gradient all-reduce)."""
    usable = len(items) - len(items) % ctx.world_size
    if usable == 0:
        raise ValueError(
            f"{len(items)} batches cannot be shared by {ctx.world_size} "
            "processes: lower max_tokens or use fewer processes"
        )
    return list(items[ctx.rank : usable : ctx.world_size])


def wrap_model(model: nn.Module, ctx: DistContext, device: torch.device) -> nn.Module:
    """``DistributedDataParallel(model)`` when several processes run, else ``model``."""
    if not ctx.enabled:
        return model
    device_ids = (
        [device.index if device.index is not None else ctx.local_rank]
        if device.type == "cuda"
        else None
    )
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def cleanup(ctx: DistContext) -> None:
    """Wait for every rank, then leave the process group (once, at the end, on every rank)."""
    if ctx.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
