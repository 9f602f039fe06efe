"""Run by test_distributed under torchrun: each rank writes its stream's ids and digest."""

from __future__ import annotations

import json
import sys

import numpy as np
import shardfeed
import torch
import torch.distributed as dist

from .conftest import digest


def main() -> None:
    data, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    loader = shardfeed.Loader(data, batch_size=32, seed=13, with_sample_id=True, num_threads=2)
    loader.set_epoch(1)
    batches = list(loader)
    ids = np.concatenate([b["sample_id"].numpy() for b in batches]).tolist()
    counts = torch.tensor([len(batches)])
    gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, counts)  # equal batch counts keep collectives in step
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(
            {
                "rank": rank,
                "world": world,
                "ids": ids,
                "digest": digest(batches),
                "counts": [int(g) for g in gathered],
            },
            f,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
