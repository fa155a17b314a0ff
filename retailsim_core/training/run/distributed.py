"""Data-parallel training under ``torchrun`` (gloo on CPU, NCCL on CUDA), via PyTorch's own
DistributedDataParallel: every rank loads the same tensors, takes every world-th batch, and
gradients are averaged by DDP. Rank 0 alone writes state and checkpoints.

    torchrun --standalone --nproc_per_node 2 -m retailsim_core.training --preset small
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn as nn


def init_from_env() -> bool:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); True if distributed."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.is_initialized()


def rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def wrap(module: nn.Module) -> nn.Module:
    """DDP when distributed (unused parameters allowed: warm-up trains the focal loss only)."""
    if rank_and_world()[1] > 1:
        return nn.parallel.DistributedDataParallel(module, find_unused_parameters=True)
    return module


def barrier() -> None:
    if rank_and_world()[1] > 1:
        dist.barrier()
