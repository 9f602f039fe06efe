"""Multi-process: under torchrun (gloo, CPU) each rank gets its slice of the one order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import shardfeed

from .conftest import digest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("world", [2, 3])
def test_torchrun_ranks(dataset, tmp_path, world):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={world}",
        "-m",
        "tests.dist_worker",
        str(dataset),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    allids = np.concatenate([r["ids"] for r in results])
    assert len(np.unique(allids)) == len(allids)
    for r in results:
        assert r["world"] == world
        assert len(set(r["counts"])) == 1
        # The same slice as a single process asking for that rank explicitly.
        ld = shardfeed.Loader(
            dataset, batch_size=32, seed=13, with_sample_id=True, rank=r["rank"], world_size=world
        )
        ld.set_epoch(1)
        assert digest(ld) == r["digest"]
