"""The Loader's stream: one order for any thread count or timing, values, resume, cleanup."""

from __future__ import annotations

import functools
import gc
import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed import _core

from .conftest import digest, engine_threads, sample_ids, to_numpy

N_ROWS = 1745
FEATS = [f"f{i}" for i in range(8)]


def loader(dataset: Path, **kw) -> shardfeed.Loader:
    kw.setdefault("batch_size", 64)
    kw.setdefault("output", "numpy")
    kw.setdefault("with_sample_id", True)
    return shardfeed.Loader(dataset, **kw)


def test_same_stream_for_1_2_3_8_threads(dataset):
    hashes = {t: digest(loader(dataset, num_threads=t, seed=3)) for t in (1, 2, 3, 8)}
    assert len(set(hashes.values())) == 1, hashes


def test_same_stream_with_random_worker_delays(dataset):
    reference = digest(loader(dataset, num_threads=1, seed=4, prefetch=1))
    for threads in (2, 5):
        slow = loader(dataset, num_threads=threads, seed=4, prefetch=1)
        slow._settings.extra["debug_max_delay_us"] = 3000  # random sleep per unit
        assert digest(slow) == reference


def test_epoch_is_a_permutation_and_changes_with_epoch_and_seed(dataset):
    ld = loader(dataset, drop_last=False, seed=1)
    e0 = sample_ids(ld)
    assert sorted(e0.tolist()) == list(range(N_ROWS))
    assert len(ld) == -(-N_ROWS // 64)
    ld.set_epoch(1)
    e1 = sample_ids(ld)
    assert sorted(e1.tolist()) == list(range(N_ROWS))
    assert not np.array_equal(e0, e1)
    ld.set_epoch(0)
    assert np.array_equal(sample_ids(ld), e0)  # an epoch's order is a pure function
    other_seed = sample_ids(loader(dataset, drop_last=False, seed=2))
    assert not np.array_equal(e0, other_seed)


def test_without_shuffle_the_order_is_natural(dataset):
    ids = sample_ids(loader(dataset, shuffle=False, drop_last=False))
    assert ids.tolist() == list(range(N_ROWS))


def test_shuffle_mixes_rows_across_row_groups(dataset):
    ld = loader(dataset, batch_size=128, shuffle_window=4, seed=0)
    rg_first = np.array([rg[3] for rg in ld._dataset.row_groups()])
    first_batch = next(iter(ld))["sample_id"]
    touched = set(np.searchsorted(rg_first, first_batch, side="right") - 1)
    assert len(touched) > 1  # one batch draws from several row groups


def test_values_travel_with_their_sample(dataset, table):
    ld = loader(dataset, seed=9, stack={"feats": FEATS}, drop_last=False)
    ref = {c: table.column(c).to_pylist() for c in ("x", "label", "flag", "vec", "seq", *FEATS)}
    for batch in ld:
        ids = batch["sample_id"]
        assert batch["id"].tolist() == ids.tolist()
        np.testing.assert_array_equal(batch["x"], np.array(ref["x"])[ids])
        np.testing.assert_array_equal(batch["label"], np.array(ref["label"])[ids])
        assert batch["flag"].dtype == np.bool_
        np.testing.assert_array_equal(batch["flag"], np.array(ref["flag"])[ids])
        assert batch["vec"].shape == (len(ids), 4) and batch["vec"].dtype == np.float32
        np.testing.assert_array_equal(batch["vec"], np.array([ref["vec"][i] for i in ids]))
        assert batch["feats"].shape == (len(ids), 8) and batch["feats"].dtype == np.float32
        for j, f in enumerate(FEATS):
            np.testing.assert_array_equal(batch["feats"][:, j], np.array(ref[f], np.float32)[ids])
        lengths = batch["seq_lengths"]
        assert batch["seq"].shape == (len(ids), int(lengths.max()))
        for row, i in enumerate(ids):
            want = ref["seq"][i]
            assert lengths[row] == len(want)
            assert batch["seq"][row, : len(want)].tolist() == want
            assert not batch["seq"][row, len(want) :].any()  # zero padding
        assert not any(f in batch for f in FEATS)  # stacked columns are not repeated


def test_mixed_dtype_stack_promotes(dataset, table):
    ld = loader(dataset, columns=[], stack={"m": ["f0", "label", "x"]}, with_sample_id=True)
    batch = next(iter(ld))
    assert batch["m"].dtype == np.float64  # x is float64
    ids = batch["sample_id"]
    np.testing.assert_array_equal(batch["m"][:, 1], table.column("label").to_numpy()[ids])
    ld32 = loader(dataset, columns=[], stack={"m": ["f0", "label"]})
    assert next(iter(ld32))["m"].dtype == np.float32


def test_torch_output_is_zero_copy_and_freed_once(dataset):
    torch = pytest.importorskip("torch")
    gc.collect()
    base = _core.live_buffers()
    ld = shardfeed.Loader(dataset, batch_size=64, stack={"x": FEATS}, columns=["label"])
    it = iter(ld)
    batch = next(it)
    assert isinstance(batch["x"], torch.Tensor) and batch["x"].shape == (64, 8)
    assert _core.live_buffers() > base
    arr = batch["x"].numpy()
    assert arr.ctypes.data == batch["x"].data_ptr()  # the tensor is a view of the C++ buffer
    del it
    gc.collect()
    held = _core.live_buffers() - base
    assert held == 2  # just "x" and "label" of the batch still referenced
    del batch, arr
    gc.collect()
    assert _core.live_buffers() == base


def test_resume_at_start_middle_and_end(dataset):
    full = list(loader(dataset, seed=11))
    n = len(full)
    for k in (0, 1, n // 2, n - 1, n):
        first = loader(dataset, seed=11)
        it = iter(first)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(first.state_dict()))
        assert state["batches_consumed"] == k
        second = loader(dataset, seed=11, num_threads=3)
        second.load_state_dict(state)
        rest = list(second)
        assert digest(rest) == digest(full[k:]), k
        # After the resumed pass the loader starts the epoch from the top again.
        assert digest(second) == digest(full)


def epoch_3_and_its_state_after_2(dataset):
    """(the loader, epoch 3 of seed 5 whole, the state after its first 2 batches)."""
    ld = loader(dataset, seed=5)
    ld.set_epoch(3)
    full = list(ld)
    it = iter(ld)
    next(it), next(it)
    return ld, full, ld.state_dict()


def test_resume_in_a_later_epoch(dataset):
    _, full, state = epoch_3_and_its_state_after_2(dataset)
    other = loader(dataset, seed=5)
    other.load_state_dict(state)
    assert other.epoch == 3
    assert digest(other) == digest(full[2:])


def test_set_epoch_of_the_resumed_epoch_keeps_the_resume(dataset):
    """The usual loop, load_state_dict then set_epoch(epoch) at the top of each epoch,
    used to restart the resumed epoch at batch 0 (its first batches trained on twice)."""
    ld, full, state = epoch_3_and_its_state_after_2(dataset)
    ld.set_epoch(4)
    after = list(ld)
    other = loader(dataset, seed=5)
    other.load_state_dict(state)
    got = []
    for epoch in range(state["epoch"], 5):
        other.set_epoch(epoch)
        other.set_epoch(epoch)  # twice: still the resume
        got += list(other)
    assert digest(got) == digest(full[2:] + after)
    # Another epoch drops the resume, and after a pass began the epoch is whole again.
    other.load_state_dict(state)
    other.set_epoch(2)
    other.set_epoch(3)
    assert digest(other) == digest(full)
    other.load_state_dict(state)
    assert digest(other) == digest(full[2:])
    other.set_epoch(3)
    assert digest(other) == digest(full)


def test_state_dict_from_other_dataset_or_settings_is_refused(dataset, tmp_path):
    state = loader(dataset, seed=1).state_dict()
    with pytest.raises(shardfeed.StateDictError, match="batch_size"):
        loader(dataset, seed=1, batch_size=32).load_state_dict(state)
    with pytest.raises(shardfeed.StateDictError, match="seed"):
        loader(dataset, seed=2).load_state_dict(state)
    from .conftest import write_dataset

    other = write_dataset(tmp_path, [("z.parquet", 300, 50)])
    with pytest.raises(ValueError, match="another dataset"):
        loader(other, seed=1).load_state_dict(state)
    with pytest.raises(shardfeed.StateDictError):
        loader(dataset, seed=1).load_state_dict({"epoch": 0})
    # Rank 0's state on rank 1: said, with what each rank must do instead.
    rank0 = loader(dataset, seed=1, rank=0, world_size=2).state_dict()
    with pytest.raises(shardfeed.StateDictError, match=r"rank: saved 0, now 1\); each rank"):
        loader(dataset, seed=1, rank=1, world_size=2).load_state_dict(rank0)


def test_a_state_with_nan_or_infinite_settings_survives_a_strict_json_round_trip(dataset):
    """NaN != NaN: a state dict whose settings hold a NaN fill or an infinite Clip bound
    was refused by its own loader after any copy; it is strict JSON now, and resumes."""
    import json

    from shardfeed.transforms import Clip, FillNull

    kw = dict(
        seed=1, fill_null={"f0": float("nan")},
        transforms=[FillNull("f1", float("nan")), Clip("f2", min=float("-inf"), max=0.5)],
        columns=["id", "f0", "f1", "f2", "seq"],
    )  # fmt: skip
    ld = loader(dataset, **kw)
    it = iter(ld)
    head = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(ld.state_dict(), allow_nan=False))
    again = loader(dataset, **kw)
    again.load_state_dict(state)
    assert digest(head + list(again)) == digest(loader(dataset, **kw))
    state["batches_consumed"] = np.int64(3)  # a NumPy integer is an integer
    again.load_state_dict(state)
    assert len(list(again)) == len(again) - 3
    with pytest.raises(shardfeed.StateDictError, match="transforms"):
        loader(dataset, **{**kw, "transforms": kw["transforms"][:1]}).load_state_dict(state)


def test_ranks_are_disjoint_equal_and_cover_the_epoch(dataset):
    for drop_last in (True, False):
        for world in range(1, 6):
            parts = [
                sample_ids(loader(dataset, seed=2, rank=r, world_size=world, drop_last=drop_last))
                for r in range(world)
            ]
            lengths = {
                len(loader(dataset, rank=r, world_size=world, drop_last=drop_last))
                for r in range(world)
            }
            assert len(lengths) == 1  # the same number of batches on every rank
            allids = np.concatenate(parts)
            assert len(np.unique(allids)) == len(allids)  # disjoint
            if drop_last:
                assert {len(p) for p in parts} == {lengths.pop() * 64}
                assert N_ROWS - len(allids) < world * 64
            else:
                assert sorted(allids.tolist()) == list(range(N_ROWS))
            # The ranks' slices are slices of the one global order of the epoch.
            whole = sample_ids(loader(dataset, seed=2, drop_last=False, batch_size=1))
            pos = {int(s): i for i, s in enumerate(whole)}
            starts = [pos[int(p[0])] for p in parts if len(p)]
            assert starts == sorted(starts)
            for p in parts:
                idx = [pos[int(s)] for s in p]
                assert idx == list(range(idx[0], idx[0] + len(idx)))


def test_a_rank_decodes_only_the_row_groups_it_needs(dataset):
    for rank in range(4):
        ld = loader(dataset, seed=6, rank=rank, world_size=4, shuffle_window=2, num_threads=2)
        ids = sample_ids(ld)
        starts = np.array([rg[3] for rg in ld._dataset.row_groups()])
        needed = set((np.searchsorted(starts, ids, side="right") - 1).tolist())
        decoded = ld.stats()["decoded_row_groups"]
        assert sorted(decoded) == sorted(needed)  # each once, and none more
        assert len(needed) < len(starts)


def test_breaking_out_stops_the_workers(dataset):
    gc.collect()  # an earlier test's loader may be held in a cycle
    assert engine_threads() == 0
    ld = loader(dataset, num_threads=6, batch_size=8)
    for i, _ in enumerate(ld):
        assert engine_threads() >= 6
        if i == 2:
            break
    gc.collect()
    assert engine_threads() == 0


def test_exception_in_consumer_and_garbage_collection_stop_the_workers(dataset):
    ld = loader(dataset, num_threads=4, batch_size=8)
    with pytest.raises(RuntimeError, match="boom"):
        for _ in ld:
            raise RuntimeError("boom")
    gc.collect()
    assert engine_threads() == 0
    it = iter(ld)
    next(it)
    assert engine_threads() >= 4
    del it  # an abandoned iterator
    gc.collect()
    deadline = time.monotonic() + 5
    while engine_threads() != 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine_threads() == 0


def test_nulls_raise_by_default_and_fill_when_asked(tmp_path):
    t = pa.table({"a": pa.array([1.0, None, 3.0] * 10, pa.float32()), "b": list(range(30))})
    import pyarrow.parquet as pq

    pq.write_table(t, tmp_path / "n.parquet", row_group_size=10)
    with pytest.raises(shardfeed.InvalidDataError, match=r"n\.parquet.*row group 0.*column 'a'"):
        list(shardfeed.Loader(tmp_path, batch_size=5, output="numpy", shuffle=False))
    ld = shardfeed.Loader(tmp_path, batch_size=30, output="numpy", shuffle=False, fill_null=-1)
    (batch,) = list(ld)
    assert batch["a"].tolist() == [1.0, -1.0, 3.0] * 10


def test_len_and_outputs(dataset):
    ld = loader(dataset, batch_size=100, stack={"f": FEATS}, columns=["label", "seq"])
    assert len(ld) == N_ROWS // 100
    assert ld.outputs == [
        ("label", "int64", []),
        ("seq", "int32", [-1]),
        ("seq_lengths", "int64", []),
        ("f", "float32", [8]),
        ("sample_id", "int64", []),
    ]
    assert ld.num_rows == N_ROWS
    assert len(list(ld)) == len(ld)


def test_torch_tensors_have_the_right_dtypes(dataset):
    torch = pytest.importorskip("torch")
    ld = shardfeed.Loader(dataset, batch_size=16, columns=["flag", "label", "vec"])
    batch = next(iter(ld))
    assert batch["flag"].dtype == torch.bool
    assert batch["label"].dtype == torch.int64
    assert batch["vec"].shape == (16, 4)
    assert to_numpy(batch["label"]).shape == (16,)


def test_decoded_memory_follows_the_prefetch_settings_not_the_dataset(tmp_path):
    # 40 row groups of 100 rows.  With 2 threads x (1 queued + 1 building) batches of 10,
    # in-flight batches span at most 50 rows, so at most two mixing windows of 2 row
    # groups are in use, and workers decode at most one window ahead: never more than
    # 6 decoded row groups alive, whatever the dataset size.
    from .conftest import write_dataset

    write_dataset(tmp_path, [(f"p{i}.parquet", 1000, 100) for i in range(4)])
    ld = shardfeed.Loader(tmp_path, batch_size=10, num_threads=2, prefetch=1, shuffle_window=2,
                          output="numpy", columns=["x"])  # fmt: skip
    for _ in ld:
        time.sleep(0.0005)  # a slow consumer lets the workers run as far ahead as allowed
    stats = ld.stats()
    assert stats["row_groups_decoded"] == 40
    assert 2 <= stats["peak_live_row_groups"] <= 6


def test_a_list_source_is_a_set_of_files(dataset):
    """The order of a list does not matter, and a file named twice, or named and inside
    a listed directory, is read once: the stream is the directory's."""
    reference = digest(loader(dataset, with_sample_id=True))
    files = [dataset / "sub" / "c.parquet", dataset / "b.parquet", dataset / "a.parquet"]
    for source in (files, files + files[:1], [dataset, dataset / "a.parquet"]):
        assert digest(loader(source, with_sample_id=True)) == reference
    assert digest(loader([str(dataset / "b.parquet"), f"file://{dataset / 'b.parquet'}"])) == (
        digest(loader(dataset / "b.parquet"))
    )


def test_overlapping_sources_and_links_read_each_file_once(dataset, tmp_path):
    """Folders listed twice, or one inside another, are one set of files (once: "no
    Parquet files under" the second); with several sources, a file reached through a
    symlinked folder too (a glob through both, or both paths named)."""
    reference = digest(loader(dataset, with_sample_id=True))
    for source in ([dataset, dataset], [dataset, f"{dataset}/"], [dataset, dataset / "sub"]):
        assert digest(loader(source, with_sample_id=True)) == reference
    root = tmp_path / "linked"
    shutil.copytree(dataset, root / "real")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    once = digest(loader(root / "real"))
    assert digest(loader(root)) == once  # a folder follows a directory link once (as before)
    assert digest(loader(f"{root}/**/*.parquet")) == once
    assert digest(loader([root / "real" / "b.parquet", root / "alias" / "b.parquet"])) == (
        digest(loader(root / "real" / "b.parquet"))
    )


def test_a_glob_skips_what_a_folder_skips_and_a_uri_may_hold_a_bare_percent(dataset, tmp_path):
    """data/**/part-*.parquet read a failed Spark attempt under _temporary/ (every row
    twice); a folder "50% sample" as a file:// URI failed to parse."""
    root = tmp_path / "spark"
    shutil.copytree(dataset, root)
    attempt = root / "_temporary" / "0" / "task_1"
    attempt.mkdir(parents=True)
    shutil.copy(dataset / "a.parquet", attempt / "a.parquet")
    reference = digest(loader(root, with_sample_id=True))
    assert digest(loader(f"{root}/**/*.parquet", with_sample_id=True)) == reference
    assert digest(loader(f"{root}/_temporary/**/*.parquet")) == digest(loader(attempt))
    # A pattern component that starts with "_" names the "_" folders it matches, as `.*`
    # names hidden ones (it matched nothing).
    assert digest(loader(f"{root}/_tem*/**/*.parquet")) == digest(loader(attempt))
    assert digest(loader(f"file://{root}/_tem*/**/*.parquet")) == digest(loader(attempt))
    odd = tmp_path / "50% sample"
    shutil.copytree(dataset, odd)
    assert digest(loader(f"file://{odd}", with_sample_id=True)) == reference
    # A dangling link is skipped by a glob as by a folder (a glob once named it a
    # missing file); a glob that matches nothing else matches nothing.
    (root / "gone.parquet").symlink_to(tmp_path / "nowhere.parquet")
    assert digest(loader(root, with_sample_id=True)) == reference
    assert digest(loader(f"{root}/**/*.parquet", with_sample_id=True)) == reference
    with pytest.raises(shardfeed.DatasetNotFoundError, match="matches no file"):
        loader(f"{root}/gone.parq*")
    # A pattern that only "_" names match says why it matched nothing (`[_]tem*`).
    with pytest.raises(shardfeed.DatasetNotFoundError, match=r"_temporary.*starts with '_'"):
        loader(f"{root}/[_]tem*/**/*.parquet")


def test_a_local_source_may_be_a_glob_or_start_with_a_tilde(dataset, tmp_path, monkeypatch):
    """A pattern stands for the paths it matches (a set, like a list); ``~`` is the home
    folder; a path that exists is taken as it is, even with pattern characters."""
    reference = digest(loader(dataset, with_sample_id=True))
    assert digest(loader(f"{dataset}/**/*.parquet", with_sample_id=True)) == reference
    top = digest(loader([dataset / "a.parquet", dataset / "b.parquet"], with_sample_id=True))
    assert digest(loader(f"{dataset}/?.parquet", with_sample_id=True)) == top
    assert digest(loader([f"{dataset}/[ab].parquet", dataset / "a.parquet"],
                         with_sample_id=True)) == top  # fmt: skip

    monkeypatch.setenv("HOME", str(dataset.parent))
    assert digest(loader(f"~/{dataset.name}", with_sample_id=True)) == reference

    odd = tmp_path / "[x]"
    odd.mkdir()
    (odd / "a.parquet").write_bytes((dataset / "a.parquet").read_bytes())
    assert digest(loader(odd)) == digest(loader(dataset / "a.parquet"))

    with pytest.raises(shardfeed.DatasetNotFoundError, match=r"matches no file or folder"):
        shardfeed.Loader(f"{dataset}/*.csv")
    with pytest.raises(shardfeed.DatasetNotFoundError, match="does not exist"):
        shardfeed.Loader(f"{dataset}/missing")


def test_a_file_uri_with_spaces_and_accents(dataset, tmp_path):
    """A URI's path may hold what a URI must escape (a space, "é"): it is escaped for
    Arrow, which decodes it; an escape already there stays one."""
    folder = tmp_path / "a b é"
    folder.mkdir()
    (folder / "x y.parquet").write_bytes((dataset / "a.parquet").read_bytes())
    expected = digest(loader(dataset / "a.parquet"))
    escaped = (folder / "x y.parquet").as_uri()  # file:///.../a%20b%20%C3%A9/x%20y.parquet
    for uri in (f"file://{folder}", f"file://{folder}/x y.parquet", escaped):
        assert digest(loader(uri)) == expected, uri


def _early(dataset: Path, **kw) -> shardfeed.Loader:
    ld = loader(dataset, **kw)
    ld._settings.extra["start_early"] = True  # whatever the CPUs are doing
    return ld


def _pass(ld: shardfeed.Loader) -> str:
    return digest(b for b in ld if time.sleep(0.0005) is None)  # a step: time to start early


def test_the_next_pass_starts_early_and_the_stream_is_unchanged(dataset):
    """Near the end of a pass the next epoch's engine starts; the passes it serves are
    the epochs' own streams, whichever way the next pass is chosen."""
    fresh = {e: digest(_epoch(dataset, e)) for e in (0, 1, 2, 7)}
    ld = _early(dataset, seed=4)
    seen = []
    for epoch in (0, 1, 2):
        ld.set_epoch(epoch)
        seen.append((_pass(ld), ld.stats()["started_early"]))
    assert seen == [(fresh[0], False), (fresh[1], True), (fresh[2], True)]
    # No set_epoch: after the pass that predicted epoch 3, the same epoch again is.
    assert (_pass(ld), ld.stats()["started_early"]) == (fresh[2], False)
    assert (_pass(ld), ld.stats()["started_early"]) == (fresh[2], True)
    # Another epoch than predicted: that engine is closed, the pass makes its own.
    ld.set_epoch(7)
    assert (_pass(ld), ld.stats()["started_early"]) == (fresh[7], False)
    # A resume mid-epoch: the same.
    it = iter(ld)
    head = [next(it) for _ in range(3)]
    state = ld.state_dict()
    del it
    ld.load_state_dict(state)
    rest = list(ld)
    assert not ld.stats()["started_early"]
    assert digest(head + rest) == fresh[7]
    del ld
    gc.collect()
    deadline = time.monotonic() + 10  # an early engine may still be in the making
    while engine_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine_threads() == 0  # the early engine of the last pass is stopped too


def _epoch(dataset: Path, epoch: int, **kw):
    ld = loader(dataset, seed=4, **kw)
    ld._settings.extra["start_early"] = False
    ld.set_epoch(epoch)
    return iter(ld)


@pytest.mark.parametrize("limit", [2**16, None])
def test_the_next_pass_starts_early_in_a_budget_the_current_pass_fills(dataset, limit):
    """A limit that one engine alone passes (2**16: every decode is its next batch's),
    or one a window fills: the next pass still starts early and takes only the room the
    current one leaves; its stream is its epoch's."""
    if limit is None:  # a window of 2 row groups, and what an engine holds at its start
        plan = loader(dataset, seed=4, shuffle_window=2)._settings.memory_plan
        assert plan is not None
        limit = plan["start_bytes"]
    ld = _early(dataset, seed=4, memory_limit=limit, shuffle_window=2)
    peaks = []
    for epoch in (0, 1, 2):
        ld.set_epoch(epoch)
        assert _pass(ld) == digest(_epoch(dataset, epoch, memory_limit=limit, shuffle_window=2))
        assert ld.stats()["started_early"] == (epoch > 0)
        memory = ld.stats()["memory"]
        peaks.append((memory["peak_bytes"], memory["peak_batch_bytes"]))
    # Together they pass the limit only as one engine may: by a pass's next batch's
    # decodes (which its own peak counts), or by the batches the current pass builds
    # from the window it holds (booked whatever the limit, at most its ready batches).
    together = ld.stats()["memory"]["peak_together_bytes"]
    assert together <= max(limit + max(b for _, b in peaks), *(p for p, _ in peaks))


def test_the_next_pass_starts_early_only_when_the_cpus_have_room(monkeypatch):
    """The default's CPU test over the last 50 ms: no while this process keeps its CPUs
    busy; when it does not, yes if the machine is at least 1/4 idle, no when other work
    fills it.  (On a clock of the test's: a shared machine's load must not decide it.)"""
    from types import SimpleNamespace

    from shardfeed import _early

    now = {"wall": 100.0, "cpu": 0.0, "idle": 0, "total": 0}
    fake_time = SimpleNamespace(monotonic=lambda: now["wall"], process_time=lambda: now["cpu"])
    monkeypatch.setattr(_early, "time", fake_time)
    monkeypatch.setattr(_early, "_machine_idle", lambda: (now["idle"], now["total"]))
    spare = _early.SpareCpu()
    spare._cpus = 1

    def step(seconds: float, own_cpu: float, machine_idle: float) -> bool:
        now["wall"] += seconds
        now["cpu"] += own_cpu
        now["total"] += 1000
        now["idle"] += int(1000 * machine_idle)
        return spare.spare()

    assert not step(0.01, 0.0, 1.0)  # too soon to tell
    assert not step(0.08, 0.08, 0.0)  # a training step on this process's CPU
    assert step(0.08, 0.0, 1.0)  # a step elsewhere (an accelerator's): room
    assert not step(0.08, 0.0, 0.1)  # idle here, but other work fills the machine
    assert step(0.08, 0.05, 0.5)  # some of each, under the bounds


# One step of a training script's history: ("epoch", e) calls set_epoch(e) and reads
# the whole pass; ("break", k) reads k batches of a pass, saves the state and stops;
# ("resume",) loads the latest saved state and reads the rest; ("again",) reads a
# whole pass with no set_epoch.
_STEP = st.one_of(
    st.tuples(st.just("epoch"), st.integers(0, 3)),
    st.tuples(st.just("break"), st.integers(0, 6)),
    st.tuples(st.just("resume")),
    st.tuples(st.just("again")),
)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    history=st.lists(_STEP, min_size=1, max_size=6),
    limit=st.sampled_from([None, 2**16]),
)
def test_any_history_of_passes_gives_each_epochs_stream_with_early_start(dataset, history, limit):
    """Whatever the script does between passes, a pass whose engine started early (or
    was closed as a wrong guess) yields exactly what a fresh loader would; also where
    the pass before fills the memory limit the two engines share (2**16)."""
    kw = {} if limit is None else {"memory_limit": limit}
    fresh = _stream_digests(dataset, limit)
    ld = _early(dataset, seed=4, **kw)
    saved: dict | None = None
    for step in history:
        if step[0] == "resume":
            if saved is None:
                continue
            ld.load_state_dict(saved)
            start = saved["batches_consumed"]
            expected = fresh[saved["epoch"]][start:]
        else:
            if step[0] == "epoch":
                ld.set_epoch(step[1])
            expected = fresh[ld.epoch]
        got = []
        for batch in ld:
            got.append(digest([batch]))
            time.sleep(0.0005)  # a step: time for the next pass to start early
            if step[0] == "break" and len(got) == step[1]:
                saved = ld.state_dict()
                break
        assert got == expected[: len(got)] and (step[0] == "break" or got == expected), step


@functools.cache
def _stream_digests(dataset: Path, limit: int | None = None) -> dict[int, list[str]]:
    out = {}
    for epoch in range(4):
        ld = loader(dataset, seed=4, **({} if limit is None else {"memory_limit": limit}))
        ld._settings.extra["start_early"] = False
        ld.set_epoch(epoch)
        out[epoch] = [digest([b]) for b in ld]
    return out


def test_the_position_counts_the_latest_pass_only(dataset):
    """set_epoch while a pass runs: that pass still hands out the old epoch's batches,
    which must not count as the new epoch's (a resume skipped batches never seen);
    of two passes at once, the latest counts."""
    ld = shardfeed.Loader(dataset, batch_size=10, output="numpy", seed=1)
    it = iter(ld)
    for _ in range(5):
        next(it)
    ld.set_epoch(1)
    for _ in range(7):
        next(it)  # epoch 0's
    state = ld.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (1, 0)
    first = iter(ld)
    next(first)
    second = iter(ld)
    for _ in range(3):
        next(second)
    next(first)
    assert ld.state_dict()["batches_consumed"] == 3
    ld.load_state_dict(ld.state_dict())  # its own state is valid


def test_close_stops_the_engines_and_later_iteration_says_so(dataset):
    """LoaderClosedError was documented but nothing public closed a loader: its
    threads and memory lived until the garbage collector found it."""
    kw = dict(batch_size=64, output="numpy", with_sample_id=True)
    reference = [b["sample_id"].copy() for b in shardfeed.Loader(dataset, **kw)]
    before = engine_threads()
    with shardfeed.Loader(dataset, **kw) as ld:
        it = iter(ld)
        held = [next(it), next(it)]
        assert engine_threads() > before
        state = ld.state_dict()
    deadline = time.monotonic() + 10
    while engine_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine_threads() == before
    # What was handed out stays valid; the stream and later passes say it is closed.
    assert [b["sample_id"].tolist() for b in held] == [r.tolist() for r in reference[:2]]
    with pytest.raises(shardfeed.LoaderClosedError):
        next(it)
    with pytest.raises(shardfeed.LoaderClosedError, match="closed"):
        list(ld)
    ld.close()  # again: nothing
    assert ld.state_dict() == state
    # The position carries over to a new loader.
    fresh = shardfeed.Loader(dataset, **kw)
    fresh.load_state_dict(state)
    rest = [b["sample_id"].tolist() for b in fresh]
    assert rest == [r.tolist() for r in reference[2:]]


def test_close_from_another_thread_ends_a_waiting_next(dataset):
    ld = shardfeed.Loader(dataset, batch_size=64, output="numpy", num_threads=1)
    ld._settings.extra["debug_slow_stage"] = "decode"
    ld._settings.extra["debug_slow_us"] = 3_000_000  # each decode waits 3 s
    closer = threading.Timer(0.3, ld.close)
    closer.start()
    t0 = time.monotonic()
    with pytest.raises(shardfeed.LoaderClosedError):
        list(ld)
    closer.join()
    assert time.monotonic() - t0 < 3.0 + 2.0
