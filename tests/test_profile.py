"""The profiler: stage times that add up, and a verdict that names the slowed stage."""

from __future__ import annotations

import json

import shardfeed
from shardfeed import cli
from shardfeed._profile import profile

FEATS = [f"f{i}" for i in range(8)]


def test_stage_times_are_consistent_with_wall_time_and_threads(dataset):
    ld = shardfeed.Loader(dataset, batch_size=64, stack={"feats": FEATS}, num_threads=3,
                          output="numpy")  # fmt: skip
    rows = sum(len(b["feats"]) for b in ld)
    s = ld.stats()
    assert set(s["stages"]) == {"fetch", "read", "decode", "transform", "assemble", "deliver"}
    assert s["threads"] == 3 and s["rows_delivered"] == rows
    busy = sum(v["seconds"] for k, v in s["stages"].items() if k != "deliver")
    assert 0 < busy
    # Workers can be busy or waiting on a full queue at most threads x elapsed in all.
    assert busy + s["worker_wait_seconds"] <= 3 * s["elapsed_seconds"] * 1.05 + 0.01
    assert s["consumer_wait_seconds"] <= s["elapsed_seconds"] + 0.01
    assert s["stages"]["decode"]["rows"] == s["rows_decoded"]
    assert s["stages"]["read"]["bytes"] > 0  # the column chunks' bytes were read


def slowed(dataset, stage: str, us: int, **kw) -> dict:
    hooks = {"debug_slow_stage": stage, "debug_slow_us": us}
    return profile(str(dataset), batch_size=64, batches=20, threads=2, _hooks=hooks, **kw)


def test_verdict_names_a_slow_transform(dataset):
    report = slowed(dataset, "transform", 40_000)
    assert report["verdict"].startswith("input-bound: transform")
    assert report["stages"]["transform"] == max(report["stages"].values())


def test_verdict_names_a_throttled_source(dataset):
    report = slowed(dataset, "read", 20_000)  # well above a decode on a busy machine
    assert report["verdict"].startswith("input-bound: read")


def test_verdict_is_compute_bound_when_the_step_dominates(dataset):
    report = profile(str(dataset), batch_size=64, batches=15, threads=2, step_ms=30)
    assert report["verdict"].startswith("compute-bound")
    assert report["consumer_wait_fraction"] < 0.5


def test_cli_json_and_trace(dataset, tmp_path, capsys):
    trace = tmp_path / "t.json"
    code = cli.main(["profile", str(dataset), "--stack", "x=f*", "--columns", "label",
                     "--batch-size", "100", "--batches", "5", "--threads", "2", "--json",
                     "--trace", str(trace)])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("stages", "consumer_wait_fraction", "rows_per_second", "verdict"):
        assert key in report
    assert report["batches"] == 5 and report["rows"] == 500
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in spans} >= {"decode", "assemble", "consumer_wait"}
    # The consumer and the workers (which of the two did the 5 batches' work is timing).
    tids = {e["tid"] for e in spans}
    assert -1 in tids and tids & {0, 1} and tids <= {0, 1, -1}, tids
    assert all(e["dur"] >= 0 for e in spans)


def _sorted_row_groups(root, groups: int, rows: int):
    """Data in row-group order: row group g holds ids g*rows .. (g+1)*rows - 1."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir()
    ids = np.arange(groups * rows, dtype=np.int64)
    pq.write_table(pa.table({"id": ids}), root / "sorted.parquet", row_group_size=rows)
    return root


def test_effective_shuffle_window_on_sorted_data(tmp_path):
    """Issue 11's measure: 1 / mean chance that two rows of a batch share a row group.  In
    order it is exactly 1; a window of w row groups scores about w; a window over every row
    group about the number of row groups (a full shuffle)."""
    data = _sorted_row_groups(tmp_path / "d", groups=16, rows=512)
    kw = dict(batch_size=256, batches=1000, threads=2)
    in_order = profile(str(data), shuffle=False, **kw)
    assert in_order["effective_shuffle_window"] == 1.0
    assert in_order["dataset_row_groups"] == 16
    window4 = profile(str(data), shuffle=True, shuffle_window=4, **kw)["effective_shuffle_window"]
    assert 3.5 < window4 < 4.5, window4
    full = profile(str(data), shuffle=True, shuffle_window=16, **kw)["effective_shuffle_window"]
    assert 13 < full < 17.5, full


def test_verdict_names_the_memory_budget_when_it_holds_decodes_back(dataset):
    """With no room for a decode ahead, only the consumer's next row group is decoded
    (the budget slows, never stops): the consumer waits for each slowed decode while the
    other worker waits for room.  The verdict names the setting, not a stage."""
    report = slowed(dataset, "decode", 30_000, memory_limit="1KiB")
    assert report["memory"]["waits"] > 0
    assert report["verdict"].startswith("input-bound: the memory budget"), report["verdict"]
    assert "memory_limit=1MiB" in report["verdict"]  # 1 KiB, rounded up to whole MiB
    # With room, the same slowed decodes run ahead: a stage, not the budget, is named.
    roomy = slowed(dataset, "decode", 30_000, memory_limit=None)
    assert not roomy["verdict"].startswith("input-bound: the memory budget")


def test_the_memory_line_says_small_sizes_in_their_unit(tmp_path, capsys):
    """A small dataset's peak and expected peak were rounded to "0 MiB"."""
    data = _sorted_row_groups(tmp_path / "small", 4, 100)
    assert cli.main(["profile", str(data), "--batch-size", "50", "--batches", "4"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("memory: peak")]
    assert " 0 MiB" not in line and "KiB" in line, line
    assert "limit 384 MiB" in line, line
