"""Train the world model from the command line, alone or data-parallel under torchrun:

    python -m retailsim_core.training --preset small
    torchrun --standalone --nproc_per_node 2 -m retailsim_core.training --preset small

The checkpoint lands in the warehouse's ``trained_checkpoint`` folder, as the asset writes it.
"""

from __future__ import annotations

import argparse
import hashlib

import torch

from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.settings import load_settings
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.training.run import distributed
from retailsim_core.training.run.train_config import TrainConfig


def main(argv: list[str] | None = None) -> None:
    settings = load_settings()
    split = settings.split
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", default=str(settings.warehouse_dir))
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "paper"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-end", type=int, default=split.train_end)
    ap.add_argument("--valid-end", type=int, default=split.valid_end)
    args = ap.parse_args(argv)
    distributed.init_from_env()
    rank, world = distributed.rank_and_world()
    log = print if rank == 0 else (lambda _: None)
    summary = train_world_model(
        Warehouse(args.warehouse),
        TemporalSplit(args.train_end, args.valid_end),
        WorldModelConfig.preset(args.preset),
        TrainConfig.preset(args.preset, seed=args.seed),
        log=log,
        model_out=True,
    )
    digest = hashlib.sha256(
        b"".join(v.detach().numpy().tobytes() for v in summary.model.state_dict().values())
    )
    print(f"rank {rank}/{world} weights sha256 {digest.hexdigest()}", flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
