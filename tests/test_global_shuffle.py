"""shuffle="global" (issue 11 item 3): a uniform permutation of every row per epoch,
gathered from the decoded tier; one stream for any threads, workers, cache state, resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed import InvalidArgumentError, StateDictError, StorageError
from shardfeed.transforms import GaussianNoise, Standardize

from .conftest import digest, sample_ids

GROUPS, ROWS, FEATURES = 64, 4096, 8


def _sorted(root: Path) -> Path:
    """Rows sorted by row group (column ``rg``), in 2 files; features follow the row."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(2):
        with pq.ParquetWriter(
            root / f"part-{f}.parquet",
            pa.schema([("rg", pa.int64()), *((f"f{i}", pa.float32()) for i in range(FEATURES))]),
        ) as writer:
            for g in range(f * GROUPS // 2, (f + 1) * GROUPS // 2):
                ids = np.arange(g * ROWS, (g + 1) * ROWS, dtype=np.float32)
                cols: dict[str, Any] = {"rg": np.full(ROWS, g, dtype=np.int64)}
                cols.update({f"f{i}": ids + i for i in range(FEATURES)})
                writer.write_table(pa.table(cols), row_group_size=ROWS)
    return root


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sorted(tmp_path_factory.mktemp("global") / "sorted")


def _loader(data: Path, cache: Path, **kw: Any) -> shardfeed.Loader:
    kw.setdefault("batch_size", 1024)
    kw.setdefault("memory_limit", "4MiB")  # a windowed shuffle gets 1-2 row groups
    return shardfeed.Loader(
        data, shuffle="global", seed=5, output="numpy", columns=["rg"],
        stack={"x": [f"f{i}" for i in range(FEATURES)]}, with_sample_id=True,
        cache_dir=cache, cache_decoded=True, **kw,
    )  # fmt: skip


def _w_eff(loader: Any) -> float:
    chances = []
    for b in loader:
        counts = np.bincount(np.asarray(b["rg"])).astype(np.float64)
        n = counts.sum()
        chances.append(float((counts * (counts - 1)).sum()) / (n * (n - 1)))
    return 1.0 / float(np.mean(chances))


def test_every_epoch_is_a_uniform_permutation_cold_or_warm(data, tmp_path):
    ld = _loader(data, tmp_path / "c", drop_last=False)
    seen = []
    for epoch in range(3):
        ld.set_epoch(epoch)
        ids = sample_ids(ld)
        assert np.array_equal(np.sort(ids), np.arange(GROUPS * ROWS))
        seen.append(ids)
        # The stack's rows are the rows the ids name: f_i = id + i.
        ld.set_epoch(epoch)
        b = next(iter(ld))
        assert np.array_equal(b["x"][:, 3], b["sample_id"].astype(np.float32) + 3)
    assert not np.array_equal(seen[0], seen[1])
    # Q = W_eff / 64 >= 0.9 on sorted data, cold (a fresh tier) and warm, where the windowed
    # shuffle under the same memory limit mixes a row group or two.
    cold = _loader(data, tmp_path / "fresh")
    assert _w_eff(cold) >= 0.9 * GROUPS
    assert cold.stats()["decoded_misses"] == GROUPS
    cold.set_epoch(1)
    assert _w_eff(cold) >= 0.9 * GROUPS
    assert cold.stats()["decoded_hits"] == GROUPS
    windowed = shardfeed.Loader(
        data, batch_size=1024, seed=5, output="numpy", columns=["rg"], memory_limit="4MiB",
        stack={"x": [f"f{i}" for i in range(FEATURES)]},
    )  # fmt: skip
    assert _w_eff(windowed) < 8


def test_a_cold_epoch_maps_what_it_decodes(data, tmp_path):
    """Every row group is in use at once, yet the engine's memory holds only those being
    decoded: each one is stored in the tier and mapped back."""
    ld = _loader(data, tmp_path / "c", num_threads=2)
    list(ld)
    mem = ld.stats()["memory"]
    dataset_bytes = GROUPS * ROWS * (8 + FEATURES * 4)
    assert mem["peak_decoded_bytes"] < dataset_bytes / 4, mem
    assert ld.stats()["decoded_misses"] == GROUPS


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(threads=st.integers(1, 4), warm=st.booleans(), batch=st.sampled_from([1000, 4096]))
def test_one_stream_for_any_threads_and_cache_state(data, tmp_path_factory, threads, warm, batch):
    base_dir = tmp_path_factory.mktemp("base")
    base = digest(_loader(data, base_dir, num_threads=1, batch_size=batch))
    cache = base_dir if warm else tmp_path_factory.mktemp("cold")
    assert digest(_loader(data, cache, num_threads=threads, batch_size=batch)) == base


def test_ranks_take_slices_of_one_permutation(data, tmp_path):
    whole = sample_ids(_loader(data, tmp_path / "c", drop_last=False))
    for world in (2, 3):
        parts = [
            sample_ids(_loader(data, tmp_path / "c", rank=r, world_size=world, drop_last=False))
            for r in range(world)
        ]
        assert np.array_equal(np.concatenate(parts), whole)


def test_random_transforms_stay_per_epoch_and_deterministic_ones_come_from_the_tier(data, tmp_path):
    recipe = [Standardize("f1", mean=1.0, std=2.0), GaussianNoise("x", std=0.5)]
    a = _loader(data, tmp_path / "a", transforms=recipe)
    b = _loader(data, tmp_path / "b", transforms=recipe, num_threads=3)
    for epoch in range(2):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert digest(a) == digest(b)
    assert b.stats()["decoded_hits"] == GROUPS
    assert b.stats()["stages"]["assemble"]["bytes"] == 0  # matrices mapped, not made


def test_resume_mid_epoch_and_the_state_records_the_mode(data, tmp_path):
    full = sample_ids(_loader(data, tmp_path / "c"))
    ld = _loader(data, tmp_path / "c")
    it = iter(ld)
    for _ in range(7):
        next(it)
    state = ld.state_dict()
    del it
    assert state["settings"]["shuffle"] == "global"
    again = _loader(data, tmp_path / "c", num_threads=3)
    again.load_state_dict(state)
    assert np.array_equal(sample_ids(again), full[7 * 1024 :])
    # A state saved under the first, non-uniform permutation would resume in another
    # order: refused, naming it.
    first = dict(state, settings={k: v for k, v in state["settings"].items() if k != "permutation"})
    with pytest.raises(StateDictError, match="permutation"):
        _loader(data, tmp_path / "c").load_state_dict(first)
    windowed = shardfeed.Loader(
        data, seed=5, output="numpy", columns=["rg"], batch_size=1024,
        stack={"x": [f"f{i}" for i in range(FEATURES)]}, with_sample_id=True,
        memory_limit="4MiB", cache_dir=tmp_path / "c", cache_decoded=True,
    )  # fmt: skip
    with pytest.raises(StateDictError, match="shuffle"):
        windowed.load_state_dict(state)


def test_torch_dataset_workers_give_the_loader_stream(data, tmp_path):
    import torch

    reference = digest(_loader(data, tmp_path / "c"))
    ds = shardfeed.TorchDataset(
        data, shuffle="global", seed=5, output="numpy", columns=["rg"], batch_size=1024,
        stack={"x": [f"f{i}" for i in range(FEATURES)]}, with_sample_id=True,
        memory_limit="4MiB", cache_dir=tmp_path / "c", cache_decoded=True,
    )  # fmt: skip
    got = digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    assert got == reference


def test_a_tier_that_cannot_hold_the_epoch_is_an_error_not_unbounded_memory(data, tmp_path):
    """A row group the tier cannot store stayed decoded in memory, every row group of
    the epoch at once (4.8 MB at a 1 MiB limit); now an error that says what to change,
    unless memory_limit=None asks for memory."""
    small = _loader(data, tmp_path / "c", cache_limit_bytes=200_000)
    with pytest.raises(StorageError, match=r"cache_limit_bytes.*memory_limit=None"):
        list(small)
    unlimited = _loader(data, tmp_path / "d", cache_limit_bytes=200_000, memory_limit=None)
    assert digest(unlimited) == digest(_loader(data, tmp_path / "e"))


def test_settings_that_cannot_give_a_global_shuffle_are_refused(data, tmp_path):
    with pytest.raises(InvalidArgumentError, match="cache_decoded=True"):
        shardfeed.Loader(data, shuffle="global")
    with pytest.raises(InvalidArgumentError, match="cache_decoded=True"):
        shardfeed.Loader(data, shuffle="global", cache_dir=tmp_path / "c")
    with pytest.raises(InvalidArgumentError, match="shuffle_window"):
        shardfeed.Loader(
            data, shuffle="global", shuffle_window=4, cache_dir=tmp_path, cache_decoded=True
        )
    with pytest.raises(TypeError, match="'global'"):
        shardfeed.Loader(data, shuffle="yes")
