"""The memory budget (issue 11): ``memory_limit`` in bytes, the shuffle window it chooses,
what ``stats()["memory"]`` counts, peak RSS under it, and the mixing it buys."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed import InvalidArgumentError, StateDictError, _core
from shardfeed._profile import memory_plan
from shardfeed.transforms import Standardize

from .conftest import digest, sample_ids

MiB = 2**20


def _sorted(root: Path, groups: int = 64, rows: int = 4096, features: int = 0) -> Path:
    """Rows sorted by row group: column ``rg`` is the row group's index."""
    root.mkdir(parents=True, exist_ok=True)
    rg = np.repeat(np.arange(groups, dtype=np.int64), rows)
    cols: dict[str, object] = {"rg": rg}
    for i in range(features):
        cols[f"f{i:03d}"] = np.full(rg.shape, i, dtype=np.float32)
    pq.write_table(pa.table(cols), root / "sorted.parquet", row_group_size=rows)
    return root


def _w_eff(batches: list[np.ndarray]) -> float:
    """1 / mean over batches of P(two rows of the batch share a row group)."""
    chances = []
    for g in batches:
        counts = np.bincount(g).astype(np.float64)
        chances.append(float((counts * (counts - 1)).sum()) / (len(g) * (len(g) - 1)))
    return 1.0 / float(np.mean(chances))


def _groups(loader: shardfeed.Loader) -> list[np.ndarray]:
    return [np.asarray(b["rg"]).copy() for b in loader]


@pytest.mark.parametrize(
    ("given_value", "expected"),
    [
        (1 << 20, 1 << 20),
        ("512MiB", 512 * MiB),
        ("1.5GB", 1_500_000_000),
        ("2g", 2_000_000_000),
        ("64 KiB", 64 << 10),
        ("0", 0),
        (None, 0),
        (0, 0),
    ],
)
def test_memory_limit_takes_bytes_or_sizes(dataset, given_value, expected):
    loader = shardfeed.Loader(dataset, batch_size=64, output="numpy", memory_limit=given_value)
    assert loader._settings.memory_limit == expected
    next(iter(loader))
    assert loader.stats()["memory"]["limit_bytes"] == expected


@pytest.mark.parametrize("bad", ["lots", "12 parsecs", "-5MiB", -1, "1e9"])
def test_a_bad_memory_limit_names_the_argument(dataset, bad):
    with pytest.raises((InvalidArgumentError, TypeError), match="memory_limit"):
        shardfeed.Loader(dataset, memory_limit=bad)


def test_the_default_limit_is_the_engines_and_the_clis():
    from shardfeed.cli import DEFAULT_MEMORY_LIMIT_TEXT

    assert _core.EngineOptions().memory_limit == 384 * MiB
    from shardfeed._check import check_bytes

    assert check_bytes("memory_limit", DEFAULT_MEMORY_LIMIT_TEXT) == 384 * MiB


def test_default_window_follows_the_limit_not_the_threads(tmp_path):
    # 16 row groups of 4096 rows x 64 float32: about 1 MiB decoded each.
    data = _sorted(tmp_path / "d", groups=16, rows=4096, features=64)
    windows = {}
    for limit in ["2MiB", "8MiB", "32MiB", "1GiB", 0]:
        for threads in (1, 3):
            loader = shardfeed.Loader(
                data, batch_size=256, output="numpy", memory_limit=limit, num_threads=threads
            )
            windows.setdefault(limit, set()).add(loader._settings.shuffle_window)
    assert all(len(w) == 1 for w in windows.values()), windows
    w = {k: v.pop() for k, v in windows.items()}
    assert w["2MiB"] == 1
    assert 1 < w["8MiB"] < w["32MiB"] <= 16
    assert w["1GiB"] == 16  # everything fits: one window of the whole dataset
    assert w[0] == 4  # no limit: the first version's window
    # An explicit window is kept whatever the limit.
    assert (
        shardfeed.Loader(data, memory_limit="2MiB", shuffle_window=7)._settings.shuffle_window == 7
    )


def test_default_budget_mixes_at_least_16_row_groups_on_sorted_data(tmp_path):
    """Issue 11's measure: 64 row groups of 4,096 rows sorted by row group, batch 1024."""
    data = _sorted(tmp_path / "d", groups=64, rows=4096, features=255)  # ~1 KiB rows
    args = dict(columns=["rg"], stack={"x": [f"f{i:03d}" for i in range(255)]},
                batch_size=1024, output="numpy", seed=3)  # fmt: skip
    loader = shardfeed.Loader(data, **args)
    assert loader._settings.shuffle_window >= 16
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        w = _w_eff(_groups(loader))
        assert w >= 16, (epoch, w)
    memory = loader.stats()["memory"]
    # The prediction of info/plan agrees with what was measured (within 15%).
    assert memory["expected_mixing"] == pytest.approx(w, rel=0.15)
    # A small budget mixes less: the trade is visible, not silent.
    small = shardfeed.Loader(data, memory_limit="16MiB", **args)
    assert small._settings.shuffle_window < 16
    assert _w_eff(_groups(small)) < 16


def test_a_filter_does_not_thin_out_the_window(tmp_path):
    """Row groups a filter prunes hold no rows: they join a window without counting, so
    a window of 6 still mixes 6 row groups when half the dataset is filtered out (it
    mixed 3), and the plan's expected_mixing says what is measured."""
    data = _sorted(tmp_path / "d", groups=24, rows=512)
    for kept in ([("rg", ">=", 12)], [("rg", "in", list(range(0, 24, 2)))]):
        loader = shardfeed.Loader(data, columns=["rg"], batch_size=512, output="numpy",
                                  seed=5, shuffle_window=6, filter=kept)  # fmt: skip
        groups = _groups(loader)
        assert sum(len(g) for g in groups) == 12 * 512
        w = _w_eff(groups)
        assert w == pytest.approx(6, rel=0.1), (kept, w)
        assert loader.stats()["memory"]["expected_mixing"] == pytest.approx(w, rel=0.1)
        # A window asked for past the row groups with rows costs no more than all of them.
        plans = [memory_plan(str(data), columns="rg", batch_size=512, shuffle_window=window,
                             filter=kept) for window in (12, 100)]  # fmt: skip
        peaks = [plan["expected_peak_bytes"] for plan in plans]
        assert peaks[0] == peaks[1] > 0


def test_stats_count_the_budget(tmp_path):
    data = _sorted(tmp_path / "d", groups=12, rows=8192, features=64)  # ~2 MiB row groups
    limit = 6 * MiB
    loader = shardfeed.Loader(
        data, batch_size=512, output="numpy", memory_limit=limit, num_threads=2
    )
    n = sum(1 for _ in loader)
    m = loader.stats()["memory"]
    assert n == len(loader)
    assert m["limit_bytes"] == limit
    assert m["peak_decoded_bytes"] > 0 and m["peak_batch_bytes"] > 0
    assert m["peak_bytes"] >= max(m["peak_decoded_bytes"], m["peak_batch_bytes"])
    plan = loader._settings.memory_plan
    assert plan is not None
    # At most the limit plus one row group's decode (the next batch's, which never waits):
    # read buffers, arrays and stack, 3 row groups' bytes at most.
    assert m["peak_bytes"] <= limit + 3 * plan["max_row_group_bytes"]
    assert m["ready_batches"] >= 1
    assert m["shuffle_window"] == loader._settings.shuffle_window


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    limit=st.sampled_from([1, 4096, 300_000, 2 * MiB, 0]),
    threads=st.integers(1, 4),
    prefetch=st.integers(1, 3),
)
def test_a_limit_never_changes_the_stream_of_a_window(dataset, limit, threads, prefetch):
    """With the window given, the budget only decides when row groups are decoded."""
    args = dict(batch_size=48, seed=11, output="numpy", shuffle_window=3, drop_last=False)
    base = digest(shardfeed.Loader(dataset, memory_limit=0, num_threads=1, **args))
    loader = shardfeed.Loader(
        dataset, memory_limit=limit, num_threads=threads, prefetch=prefetch, **args
    )
    assert digest(loader) == base


def test_resume_records_the_chosen_window(tmp_path):
    data = _sorted(tmp_path / "d", groups=16, rows=4096, features=64)
    args = dict(batch_size=500, seed=2, output="numpy", with_sample_id=True)
    full = sample_ids(shardfeed.Loader(data, memory_limit="8MiB", **args))
    loader = shardfeed.Loader(data, memory_limit="8MiB", **args)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    del it
    assert state["settings"]["shuffle_window"] == loader._settings.shuffle_window
    # Another limit that leads to the same window resumes; one that changes it is refused.
    same = shardfeed.Loader(data, memory_limit="8MiB", num_threads=1, **args)
    same.load_state_dict(state)
    assert np.array_equal(sample_ids(same), full[5 * 500 :])
    other = shardfeed.Loader(data, memory_limit="1GiB", **args)
    with pytest.raises(StateDictError, match="shuffle_window"):
        other.load_state_dict(state)


_RSS_CHILD = r"""
import json, sys
import pyarrow
import shardfeed
try:  # freed pages go back at once: RSS then does not depend on how fast the run went
    pyarrow.jemalloc_set_decay_ms(0)
except NotImplementedError:
    pass
def status_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
def rss_mb():
    return status_mb("VmRSS:")
src, limit, window = sys.argv[1], sys.argv[2], sys.argv[3]
base = rss_mb()
loader = shardfeed.Loader(src, batch_size=2048, output="numpy", num_threads=2,
                          stack={"x": [f"f{i:03d}" for i in range(64)]}, columns=["rg"],
                          memory_limit=limit,
                          shuffle_window=None if window == "auto" else int(window))
for epoch in (0, 1):
    loader.set_epoch(epoch)
    for batch in loader:
        pass
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would start at pytest's.
peak = status_mb("VmHWM:")
print(json.dumps({"above": peak - base, "memory": loader.stats()["memory"],
                  "window": loader._settings.shuffle_window}))
"""


def _peak_rss(data: Path, limit: str, window: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(data), limit, window],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_peak_rss_follows_the_budget_not_the_row_group_size(tmp_path):
    """Large row groups (8 x 131,072 rows x 64 float32: 33 MiB decoded each), each run in a
    process of its own: under a 48 MiB budget the window shrinks to one row group and the
    peak RSS stays far below that of an unlimited engine with a window of all 8."""
    root = tmp_path / "big"
    root.mkdir()
    rows = 131_072
    rng = np.random.default_rng(0)
    with pq.ParquetWriter(
        root / "big.parquet",
        pa.schema([("rg", pa.int64()), *((f"f{i:03d}", pa.float32()) for i in range(64))]),
    ) as writer:
        for g in range(8):
            cols = {"rg": np.full(rows, g, dtype=np.int64)}
            cols.update(
                {f"f{i:03d}": rng.standard_normal(rows, dtype=np.float32) for i in range(64)}
            )
            writer.write_table(pa.table(cols), row_group_size=rows)
    limited = _peak_rss(root, "48MiB", "auto")
    unlimited = _peak_rss(root, "0", "8")
    assert limited["window"] == 1
    mem = limited["memory"]
    assert isinstance(mem, dict)
    assert mem["over_limit"] >= 0
    # The budget's own bound: decodes ahead stop at the limit; on top of it come the batches
    # built since (a quarter of the limit at most) and the urgent decodes of the consumer's
    # next batch: one reservation (compressed chunks + 2x decoded < 3 x 36 MiB) per row group
    # it spans, two at a window's edge.
    assert mem["peak_bytes"] <= 1.25 * 48 * MiB + 2 * 3 * 36 * MiB
    # The engine's own bytes: a third of the unlimited engine's, which holds every row group.
    free = unlimited["memory"]
    assert isinstance(free, dict)
    assert mem["peak_bytes"] < 0.5 * free["peak_bytes"]
    # Resident memory (with the libraries and the allocator's freed-but-kept pages, the
    # same in both): measured 0.65 of the unlimited engine's.
    assert float(limited["above"]) < 0.8 * float(unlimited["above"]), (limited, unlimited)


def test_info_predicts_window_memory_and_mixing(tmp_path, capsys):
    from shardfeed import cli

    data = _sorted(tmp_path / "d", groups=16, rows=4096, features=64)
    assert cli.main(["info", str(data), "--memory-limit", "8MiB", "--batch-size", "256"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    loader = shardfeed.Loader(data, batch_size=256, memory_limit="8MiB", output="numpy")
    assert plan["shuffle_window"] == loader._settings.shuffle_window
    assert plan["memory_limit"] == 8 * MiB
    assert plan["batches"] == len(loader)
    for _ in loader:
        pass
    m = loader.stats()["memory"]
    # The prediction brackets what the engine booked: at most the expected peak.
    assert 0 < m["peak_bytes"] <= plan["expected_peak_bytes"] * 1.25
    assert plan["floor_bytes"] <= plan["expected_peak_bytes"]
    w = _w_eff([np.asarray(b["rg"]).copy() for b in loader])
    assert plan["expected_mixing"] == pytest.approx(w, rel=0.25)
    # Settings that cannot load still print the catalog, and say why.
    assert cli.main(["info", str(data), "--columns", "nope"]) == 2  # and exit status 2
    assert "error" in json.loads(capsys.readouterr().out)["plan"]


def test_info_says_which_limit_mixes_16_row_groups(tmp_path, capsys):
    """When the limit cuts the default window below 16 row groups, ``info`` names the
    limit that gives 16 (and it does), and the global shuffle; at that limit it is quiet."""
    from shardfeed import cli

    data = _sorted(tmp_path / "d", groups=24, rows=4096, features=64)
    assert cli.main(["info", str(data), "--memory-limit", "4MiB", "--batch-size", "256"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["shuffle_window"] < 16
    need = plan["limit_for_window_16"]
    assert need > 4 * MiB
    assert f"memory_limit='{-(-need // MiB)}MiB'" in plan["hint"]
    assert "shuffle='global'" in plan["hint"]
    loader = shardfeed.Loader(data, batch_size=256, memory_limit=need, output="numpy")
    assert loader._settings.shuffle_window == 16
    less = shardfeed.Loader(data, batch_size=256, memory_limit=need - 1)
    assert less._settings.shuffle_window == 15
    assert cli.main(["info", str(data), "--memory-limit", str(need), "--batch-size", "256"]) == 0
    assert "hint" not in json.loads(capsys.readouterr().out)["plan"]
    # A window the user chose is theirs: no hint.
    args = ["--memory-limit", "4MiB", "--shuffle-window", "2"]
    assert cli.main(["info", str(data), *args]) == 0
    assert "hint" not in json.loads(capsys.readouterr().out)["plan"]


def test_wide_stacks_read_a_few_columns_at_a_time_give_the_same_values(tmp_path):
    """A row group too large to pre-buffer (> 64 MiB) whose stack's members feed nothing else
    is read kFusedColumns (16) members at a time straight into the stack's matrix (held once,
    not as arrays and matrix): 51 members of three types, nulls filled, a transform, a
    filter -- against NumPy, and against the whole-row-group path (a member also read
    alone)."""
    rng = np.random.default_rng(3)
    rows = 360_000  # x 48 float32 (random: incompressible) = 69 MB in one row group
    cols: dict[str, Any] = {"id": np.arange(rows, dtype=np.int64)}
    cols.update({f"f{i:02d}": rng.standard_normal(rows, dtype=np.float32) for i in range(48)})
    cols.update({f"i{i}": rng.integers(-50, 50, rows).astype(np.int32) for i in range(2)})
    d = rng.standard_normal(rows)
    table = pa.table(cols).append_column("d", pa.array(d, mask=rng.random(rows) < 0.1))
    root = tmp_path / "wide"
    root.mkdir()
    pq.write_table(table, root / "w.parquet", row_group_size=rows)
    rg = pq.ParquetFile(root / "w.parquet").metadata.row_group(0)
    compressed = sum(rg.column(i).total_compressed_size for i in range(rg.num_columns))
    assert compressed > 64 * MiB  # not pre-buffered: the fused path
    members = [*(f"f{i:02d}" for i in range(48)), "i0", "i1", "d"]
    args: dict[str, Any] = dict(
        batch_size=4096, shuffle=False, output="numpy", drop_last=False, fill_null=-7.0,
        stack={"x": members}, transforms=[Standardize("f03", mean=1.0, std=2.0)],
        filter=[("id", ">=", 1000)],
    )  # fmt: skip
    fused = shardfeed.Loader(root, columns=["id"], **args)
    got = np.concatenate([b["x"] for b in fused])
    assert fused.stats()["memory"]["peak_decoded_bytes"] > 0
    ids = np.concatenate([b["id"] for b in shardfeed.Loader(root, columns=["id"], **args)])
    assert np.array_equal(ids, np.arange(1000, rows))
    expected = np.column_stack(
        [np.nan_to_num(table.column(m).to_numpy(zero_copy_only=False), nan=-7.0) for m in members]
    )[1000:]
    expected[:, 3] = (expected[:, 3].astype(np.float32) - 1.0) / 2.0
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    whole = shardfeed.Loader(root, columns=["id", "f07"], **args)
    assert np.array_equal(np.concatenate([b["x"] for b in whole]), got)


def _write_list_table(
    root: Path, seed: int, rows: int, features: int, label_step: int, row_group_size: int
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """``root/r.parquet``: float32 columns f0.. (a stack), an int64 ``label`` (row index x
    ``label_step``) and ``ids``, a list<int32> of 0-8 values.  Returns the columns, the
    list offsets and the list values."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, rows)
    cols: dict[str, Any] = {
        f"f{i}": rng.standard_normal(rows, dtype=np.float32) for i in range(features)
    }
    cols["label"] = np.arange(rows, dtype=np.int64) * label_step
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.integers(0, 1000, int(offsets[-1]), dtype=np.int32)
    table = pa.table(cols).append_column("ids", pa.ListArray.from_arrays(offsets, pa.array(values)))
    pq.write_table(table, root / "r.parquet", row_group_size=row_group_size)
    return cols, offsets, values


def test_batch_buffers_the_consumer_drops_are_reused_and_kept_ones_never_are(tmp_path):
    """Batch buffers come back to the engine when the consumer drops a batch, and the
    next batches are built in them (``batch_buffers_reused``): a batch the consumer still
    holds is never written again, whatever its outputs' sizes (a variable-length list
    column gives buffers of a different size in every batch)."""
    root = tmp_path / "recycle"
    root.mkdir()
    cols, offsets, _ = _write_list_table(root, seed=11, rows=30_000, features=6, label_step=3,
                                         row_group_size=5000)  # fmt: skip
    lengths = np.diff(offsets)
    features = [f"f{i}" for i in range(6)]
    loader = shardfeed.Loader(
        root, columns=["label", "ids"], batch_size=700, shuffle=True, seed=4,
        stack={"x": features}, output="numpy", with_sample_id=True, num_threads=2,
    )  # fmt: skip
    x = np.column_stack([cols[f] for f in features])
    kept: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    arrays = batches = 0
    for i, b in enumerate(loader):
        ids = b["sample_id"]
        np.testing.assert_array_equal(b["x"], x[ids])
        np.testing.assert_array_equal(b["label"], cols["label"][ids])
        np.testing.assert_array_equal(b["ids_lengths"], lengths[ids])
        arrays += len(b)
        batches += 1
        if i % 3 == 0:  # held to the end: its buffers must not be handed out again
            kept.append((b, {k: np.array(v, copy=True) for k, v in b.items()}))
    assert batches == len(loader)
    for held, copy in kept:
        for name, value in copy.items():
            np.testing.assert_array_equal(held[name], value, err_msg=name)
    m = loader.stats()["memory"]
    assert m["batch_buffers_reused"] > 0, m
    assert m["batch_buffers_reused"] + m["batch_buffers_allocated"] == arrays, m
    # A fresh engine writes the blocks of its ready batches before the first batch
    # (the list column's, whose size varies, excepted): the first batches take them.
    assert m["batch_buffers_prefaulted"] > 0, m


@pytest.fixture(scope="module")
def recycle_data(tmp_path_factory):
    """6,000 rows: a stack of 5 float32 columns, an int64 label, a list<int32> of 0-8."""
    root = tmp_path_factory.mktemp("recycle")
    cols, offsets, values = _write_list_table(root, seed=12, rows=6000, features=5, label_step=7,
                                              row_group_size=1100)  # fmt: skip
    return root, cols, offsets, values


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch_size=st.integers(1, 900),
    limit=st.sampled_from([4096, 300_000, 0]),
    threads=st.integers(1, 3),
    hold=st.lists(st.booleans(), min_size=1, max_size=6),
    drop_last=st.booleans(),
)
def test_held_batches_stay_intact_whatever_the_consumer_keeps(
    recycle_data, batch_size, limit, threads, hold, drop_last
):
    """Whichever batches the consumer keeps (``hold``, cycled) and drops, with batch sizes,
    limits (a tiny one keeps one idle buffer at most) and thread counts drawn: each batch
    holds its own rows, and a kept batch is never written again after later ones."""
    root, cols, offsets, values = recycle_data
    loader = shardfeed.Loader(
        root, columns=["label", "ids"], batch_size=batch_size, shuffle=True, seed=3,
        stack={"x": [f"f{i}" for i in range(5)]}, output="numpy", with_sample_id=True,
        num_threads=threads, memory_limit=limit, drop_last=drop_last,
    )  # fmt: skip
    x = np.column_stack([cols[f"f{i}"] for i in range(5)])
    kept = []
    arrays = 0
    for i, b in enumerate(loader):
        ids = b["sample_id"]
        np.testing.assert_array_equal(b["x"], x[ids])
        np.testing.assert_array_equal(b["label"], cols["label"][ids])
        width = b["ids"].shape[1]
        for row, sid in enumerate(ids[:50]):
            want = values[offsets[sid] : offsets[sid + 1]]
            assert b["ids_lengths"][row] == len(want)
            np.testing.assert_array_equal(b["ids"][row, : len(want)], want)
            assert not b["ids"][row, len(want) : width].any()
        arrays += len(b)
        if hold[i % len(hold)]:
            kept.append((b, {k: np.array(v, copy=True) for k, v in b.items()}))
    for held, copy in kept:
        for name, value in copy.items():
            np.testing.assert_array_equal(held[name], value, err_msg=name)
    m = loader.stats()["memory"]
    assert m["batch_buffers_reused"] + m["batch_buffers_allocated"] == arrays, m


def test_reused_stack_matrices_hold_only_their_own_row_groups_values(tmp_path):
    """A window's freed stack matrices are handed to the next decodes of the same size
    (``matrices_reused``) rather than fresh pages: every row of every batch must still be
    its own row's values, nulls filled, whatever the buffer held before."""
    rng = np.random.default_rng(5)
    rows, groups = 6000, 12
    n = rows * groups
    cols: dict[str, Any] = {
        f"f{i:02d}": rng.standard_normal(n, dtype=np.float32) for i in range(31)
    }
    nullable = rng.standard_normal(n).astype(np.float32)
    table = pa.table(cols).append_column("g", pa.array(nullable, mask=rng.random(n) < 0.2))
    root = tmp_path / "reuse"
    root.mkdir()
    pq.write_table(table, root / "r.parquet", row_group_size=rows)
    members = [*cols, "g"]
    loader = shardfeed.Loader(
        root, batch_size=1000, shuffle=True, seed=9, stack={"x": members}, output="numpy",
        fill_null=-3.0, with_sample_id=True, shuffle_window=2, num_threads=2,
    )  # fmt: skip
    expected = np.column_stack(
        [np.nan_to_num(table.column(m).to_numpy(zero_copy_only=False), nan=-3.0) for m in members]
    )
    for _ in range(2):
        seen = 0
        for b in loader:
            np.testing.assert_array_equal(b["x"], expected[b["sample_id"]])
            seen += len(b["sample_id"])
        assert seen == n
        m = loader.stats()["memory"]
        assert m["matrices_reused"] > 0, m
        assert m["matrices_reused"] + m["matrices_allocated"] == groups, m
        assert 0 < m["peak_idle_bytes"] <= m["limit_bytes"] / 2, m


def test_the_next_epoch_decodes_into_the_memory_the_last_one_left(tmp_path):
    """Between epochs a Loader keeps the idle stack matrices and batch buffers of the last
    epoch's engine for the next one (decoding into fresh pages made each epoch's first row
    groups cost two to three times the others): the next epoch allocates no matrix, and its
    batches are the ones a fresh Loader gives for that epoch.  (One mixing window of two
    row groups: each epoch decodes two matrices, none while another is idle.)"""
    rng = np.random.default_rng(8)
    rows, groups, width = 5000, 2, 24
    cols = {f"f{i:02d}": rng.standard_normal(rows * groups, dtype=np.float32) for i in range(width)}
    root = tmp_path / "epochs"
    root.mkdir()
    pq.write_table(pa.table(cols), root / "e.parquet", row_group_size=rows)
    args: dict[str, Any] = dict(
        batch_size=1000, shuffle=True, seed=2, stack={"x": list(cols)}, output="numpy",
        with_sample_id=True, shuffle_window=2, num_threads=2,
    )  # fmt: skip

    def epoch_bytes(loader: shardfeed.Loader, epoch: int) -> bytes:
        loader.set_epoch(epoch)
        return b"".join(b["sample_id"].tobytes() + b["x"].tobytes() for b in loader)

    loader = shardfeed.Loader(root, **args)
    first = epoch_bytes(loader, 0)
    m = loader.stats()["memory"]
    # Each matrix made once: written before the first batch (nothing was carried over),
    # then taken by its decode, or made by the decode.
    assert m["matrices_allocated"] + m["matrices_prefaulted"] == groups, m
    assert m["matrices_reused"] == m["matrices_prefaulted"] > 0, m
    second = epoch_bytes(loader, 1)
    m = loader.stats()["memory"]
    assert m["matrices_allocated"] == m["matrices_prefaulted"] == 0, m
    assert m["matrices_reused"] == groups, m
    assert m["batch_buffers_reused"] > 0, m
    assert m["batch_buffers_prefaulted"] == 0, m  # the first epoch's blocks carried over
    fresh = shardfeed.Loader(root, **args)
    assert epoch_bytes(fresh, 1) == second
    m = fresh.stats()["memory"]
    assert m["matrices_allocated"] + m["matrices_prefaulted"] == groups, m
    assert epoch_bytes(fresh, 0) == first


def test_no_more_batch_buffers_are_written_ahead_than_the_pass_has(tmp_path):
    """48 rows of 1 MiB in 12 batches made 520 buffers of 4 MiB with prefetch=64 (2 GiB
    of pages written before the first batch and never used)."""
    rows = 48
    table = pa.table({"v": pa.FixedSizeListArray.from_arrays(
        pa.array(np.zeros(rows * 262_144, np.float32)), 262_144)})  # fmt: skip
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=8)
    loader = shardfeed.Loader(tmp_path, batch_size=4, num_threads=4, prefetch=64,
                              memory_limit=None, output="numpy")  # fmt: skip
    assert sum(1 for _ in loader) == len(loader) == 12
    m = loader.stats()["memory"]
    assert 0 < m["batch_buffers_prefaulted"] <= len(loader), m


def test_one_long_list_cannot_pad_a_batch_past_the_limit(tmp_path):
    """A variable-length list output is padded to its longest list: one row of 400,000
    elements would make a [16, 400000] float32 batch (24 MiB) of padding. Under a
    smaller limit that batch is refused, naming the file, row group and row, after
    every batch before it; without a limit (or a larger one) it is delivered."""
    n, long_row, long_len = 64, 40, 400_000
    offsets = np.arange(n + 1, dtype=np.int32)
    offsets[long_row + 1 :] += long_len - 1
    values = np.arange(offsets[-1], dtype=np.float32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    path = tmp_path / "outlier.parquet"
    pq.write_table(pa.table({"id": np.arange(n), "l": lists}), path, row_group_size=32)
    options: dict[str, Any] = dict(batch_size=16, shuffle=False, drop_last=False, output="numpy")
    got: list[np.ndarray] = []
    with shardfeed.Loader(path, memory_limit="8MiB", **options) as loader:
        with pytest.raises(InvalidArgumentError) as raised:
            for batch in loader:
                got.append(batch["id"].copy())
    message = str(raised.value)
    for part in ["batch 2", "output 'l'", "400000 elements", "file 'outlier.parquet'",
                 "row group 1, row 8", "memory_limit (8.0 MiB)"]:  # fmt: skip
        assert part in message, message
    assert [list(ids) for ids in got] == [list(range(0, 16)), list(range(16, 32))]
    del raised, got  # (the traceback's frames hold batches: freed here, not in a later test)
    gc.collect()
    for limit in [None, "64MiB"]:
        with shardfeed.Loader(path, memory_limit=limit, **options) as loader:
            batches = list(loader)
        assert batches[2]["l"].shape == (16, long_len)
        row = batches[2]["l"][long_row - 32]
        start = offsets[long_row]
        assert np.array_equal(row, values[start : start + long_len])
        assert batches[2]["l_lengths"][long_row - 32] == long_len


def test_tiny_row_groups_are_booked_with_what_each_column_chunk_holds(tmp_path):
    """10-row row groups of 100 columns: a decoded column chunk holds about a kilobyte of
    objects besides its 40 bytes of values. Unbooked, the default window took every row
    group and the process held 30 times what peak_bytes said; booked, the window is what
    the limit allows and peak_bytes counts them."""
    groups, cols = 600, 100
    values = np.random.default_rng(0).random((groups * 10, cols), dtype=np.float32)
    pq.write_table(pa.table({f"f{i}": values[:, i] for i in range(cols)}),
                   tmp_path / "p.parquet", row_group_size=10)  # fmt: skip
    limit = 16 * MiB
    loader = shardfeed.Loader(tmp_path, batch_size=64, output="numpy", memory_limit=limit)
    window = loader._settings.shuffle_window
    per_group = cols * 1536  # footprint.h: kColumnOverheadBytes a column chunk
    assert window <= 3 / 8 * limit / per_group < groups
    assert sum(len(b["f0"]) for b in loader) == groups * 10 // 64 * 64
    memory = loader.stats()["memory"]
    assert memory["peak_decoded_bytes"] >= window * per_group / 2
    assert memory["peak_bytes"] <= limit + 2 * per_group + 8 * MiB
