"""filter= (issue 9 item 7): pruning by partitions and statistics, exact rows, the
plan over the passing rows, the cache of pass counts, bad filters; info --filter."""

from __future__ import annotations

import datetime as dt
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed import cli
from shardfeed.transforms import GaussianNoise

from .conftest import digest

DATES = [f"2024-01-0{d}" for d in range(1, 6)]
COUNTRIES = ["CA", "FR", "US"]
ROWS = 60  # per file, in 3 row groups of 20
NUM = ["id", "n", "x", "day", "ts"]  # the columns a tensor can hold


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """date=.../country=.../part.parquet; `n` ascends through each file so that
    row-group statistics can prune; `x` and `name` have nulls."""
    root = tmp_path_factory.mktemp("filter") / "lake"
    next_id = 0
    for d, date in enumerate(DATES):
        for c, country in enumerate(COUNTRIES):
            ids = np.arange(next_id, next_id + ROWS, dtype=np.int64)
            next_id += ROWS
            x = (ids % 17).astype(np.float64) / 2
            names = [None if i % 11 == 0 else f"n{i % 7}" for i in ids]
            table = pa.table(
                {
                    "id": ids,
                    "n": pa.array(np.arange(ROWS, dtype=np.int32) + 10 * d + c),
                    "x": pa.array(x, mask=(ids % 13 == 0)),
                    "name": pa.array(names, pa.string()),
                    "day": pa.array([dt.date(2024, 1, 1 + d)] * ROWS, pa.date32()),
                    "ts": pa.array(
                        [dt.datetime(2024, 1, 1 + d, i % 24) for i in range(ROWS)],
                        pa.timestamp("us"),
                    ),
                }
            )
            folder = root / f"date={date}" / f"country={country}"
            folder.mkdir(parents=True)
            pq.write_table(table, folder / "part.parquet", row_group_size=20)
    return root


def loader_ids(source: Path, filt: Any, **kw: Any) -> np.ndarray:
    kw.setdefault("batch_size", 16)
    ld = shardfeed.Loader(
        source, columns=["id"], shuffle=False, output="numpy", drop_last=False, filter=filt, **kw
    )
    batches = list(ld)
    if not batches:
        return np.zeros(0, np.int64)
    return np.concatenate([b["id"] for b in batches])


def pyarrow_ids(source: Path, filt: Any) -> np.ndarray:
    table = pads.dataset(source, partitioning="hive").to_table(
        filter=pq.filters_to_expression(filt), columns=["id"]
    )
    return np.sort(table.column("id").to_numpy())


CASES: list[Any] = [
    [("date", "==", "2024-01-02")],
    [("date", "=", "2024-01-02")],
    [("date", "!=", "2024-01-02")],
    [("date", "<", "2024-01-03")],
    [("date", "<=", "2024-01-03")],
    [("date", ">", "2024-01-03")],
    [("date", ">=", "2024-01-03"), ("country", "in", ["US", "CA"])],
    [("country", "not in", ["US"])],
    [("n", ">", 50)],
    [("n", "<=", 12)],
    [("n", "in", [3, 30, 31, 64])],
    [("n", "not in", [3, 30])],
    [("x", ">=", 4.0)],
    [("x", "!=", 0.5)],
    [("x", "not in", [0.0, 1.0])],
    [("name", "==", "n3")],
    [("name", "!=", "n3")],
    [("name", "not in", ["n1", "n2"])],
    [[("date", "==", "2024-01-01")], [("n", ">", 60), ("x", "<", 2)]],
    [[("country", "==", "FR"), ("n", "<", 15)], [("name", "in", ["n0", "n6"])]],
]


@pytest.mark.parametrize("filt", CASES, ids=[json.dumps(c) for c in CASES])
def test_rows_equal_pyarrow(lake: Path, filt: Any) -> None:
    ours = loader_ids(lake, filt)
    assert np.all(np.diff(ours) > 0), "natural order kept"
    np.testing.assert_array_equal(ours, pyarrow_ids(lake, filt))


def test_dates_and_timestamps_take_python_values(lake: Path) -> None:
    for value in ("2024-01-03", dt.date(2024, 1, 3), np.datetime64("2024-01-03")):
        ids = loader_ids(lake, [("day", ">=", value)])
        np.testing.assert_array_equal(ids, pyarrow_ids(lake, [("date", ">=", "2024-01-03")]))
    cut = dt.datetime(2024, 1, 2, 12)
    ids = loader_ids(lake, [("ts", "<", cut)])
    ref = pads.dataset(lake, partitioning="hive").to_table(
        filter=pads.field("ts") < pa.scalar(cut, pa.timestamp("us")), columns=["id"]
    )
    np.testing.assert_array_equal(ids, np.sort(ref.column("id").to_numpy()))
    assert len(loader_ids(lake, [("ts", "<", "2024-01-02T12:00:00")])) == len(ids)


def test_float32_sets_dates_given_datetimes_and_bad_strings(tmp_path: Path) -> None:
    """`in` / `not in` on a float32 column take each value as float32 holds it, as
    pyarrow's is_in casts its value set (0.1 kept no row; == compares in float64 and still
    does); a date column takes a datetime as an instant (naive: UTC; it was refused); a
    string that is not Unicode text is an InvalidArgumentError naming the filter."""
    f = pa.array([0.1, 0.5, 0.1, None, 1e30, 0.25], pa.float32())
    table = pa.table({
        "id": pa.array(range(6), pa.int64()),
        "f": f,
        "d": pa.array([dt.date(2024, 1, i) for i in range(1, 7)], pa.date32()),
        "s": pa.array(["a", "b", "c", "d", "e", "f"]),
    })  # fmt: skip
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=2)
    for values in ([0.1], [0.1, 0.25], [1e30, 0.5], [2.0]):
        isin = pc.is_in(f, value_set=pa.array(values, pa.float32())).to_numpy(zero_copy_only=False)
        want = np.flatnonzero(isin)
        nulls = np.flatnonzero(pc.is_null(f).to_numpy(zero_copy_only=False))
        assert loader_ids(tmp_path, [("f", "in", values)]).tolist() == want.tolist()
        not_in = sorted(set(range(6)) - set(want.tolist()))  # nulls pass `not in`
        assert loader_ids(tmp_path, [("f", "not in", values)]).tolist() == not_in
        assert set(nulls) <= set(not_in)
    assert loader_ids(tmp_path, [("f", "in", [0.1])]).tolist() == [0, 2]
    assert len(loader_ids(tmp_path, [("f", "==", 0.1)])) == 0  # float64, as pyarrow's ==
    # An integer float32 cannot hold is refused, as pyarrow refuses it (it kept 16777216's
    # rows); values that round alike are one.
    with pytest.raises(shardfeed.InvalidArgumentError, match="16777217 has no exact float32 value"):
        loader_ids(tmp_path, [("f", "in", [16777217])])
    # One float64 cannot hold either: the error names the column's own type.
    for op, value in (("in", [2**63 + 1]), ("==", 2**63 + 1)):
        with pytest.raises(
            shardfeed.InvalidArgumentError, match=r"no exact float32 value \(the col"
        ):
            loader_ids(tmp_path, [("f", op, value)])
    assert loader_ids(tmp_path, [("f", "in", [0.1, float(np.float32(0.1))])]).tolist() == [0, 2]
    # One set, one canonical form (the filter cache's key), whatever the order of its zeros.
    from shardfeed import _filter

    for column, type_name in (("f", "float"), ("f", "double")):
        keys = {_filter.key(_filter.canonicalize([(column, "in", zeros)], [(column, type_name)]))
                for zeros in ([-0.0, 0.0], [0.0, -0.0], [0.0, -0.0, 0.0])}  # fmt: skip
        assert len(keys) == 1, keys
    for filt in ([("d", ">=", dt.datetime(2024, 1, 3))], [("d", ">", dt.datetime(2024, 1, 3, 12))],
                 [("d", "<", dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc))]):  # fmt: skip
        np.testing.assert_array_equal(loader_ids(tmp_path, filt), pyarrow_ids(tmp_path, filt))
    assert loader_ids(tmp_path, [("d", ">=", dt.datetime(2024, 1, 3))]).tolist() == [2, 3, 4, 5]
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"'s'.*not Unicode text"):
        loader_ids(tmp_path, [("s", "==", "\ud800")])


def test_binary_columns_filter_by_text(tmp_path: Path) -> None:
    """Text stored as binary (old Hive and Impala files), a column that is text in some
    files and binary in others, and a partition key with a value that is not UTF-8 (a
    binary column) are filtered by text values, compared bytewise as pyarrow compares
    them; they were refused as types that cannot be filtered on."""
    names = [b"apple", b"b\xc3\xa9", None, b"cherry", b"", b"date"]
    pq.write_table(pa.table({"id": pa.array(range(6), pa.int64()),
                             "b": pa.array(names, pa.binary())}),
                   tmp_path / "a.parquet", row_group_size=2)  # fmt: skip
    cases = ([("b", "==", "cherry")], [("b", "in", ["apple", "bé", "zz"])], [("b", "<", "b")],
             [("b", ">=", b"c")], [("b", "not in", [""])], [("b", "!=", "date")])  # fmt: skip
    for filt in cases:
        raw = [(c, o, [v.encode() if isinstance(v, str) else v for v in x] if isinstance(x, list)
                else x.encode() if isinstance(x, str) else x) for c, o, x in filt]  # fmt: skip
        np.testing.assert_array_equal(loader_ids(tmp_path, filt), pyarrow_ids(tmp_path, raw),
                                      err_msg=str(filt))  # fmt: skip
    with pytest.raises(shardfeed.InvalidArgumentError, match="not UTF-8"):
        loader_ids(tmp_path, [("b", "==", b"\xff")])
    with pytest.raises(shardfeed.ArgumentTypeError, match="binary column takes text"):
        loader_ids(tmp_path, [("b", "==", 3)])
    # Text in one file, binary in another: one large_binary column, filtered alike.
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(pa.table({"id": [10, 11], "b": pa.array(["x", "y"])}), mixed / "a.parquet")
    pq.write_table(pa.table({"id": [12, 13], "b": pa.array([b"y", b"z"])}), mixed / "b.parquet")
    assert loader_ids(mixed, [("b", "==", "y")]).tolist() == [11, 12]
    # A partition key with a Latin-1 folder is binary; its text values still filter.
    keys = tmp_path / "keys"
    keys.mkdir()
    for i, folder in enumerate((b"k=x", b"k=caf\xe9", b"k=y")):
        pq.write_table(pa.table({"id": [i]}), keys / "p.parquet")  # pyarrow takes UTF-8 paths
        target = os.fsencode(keys) + b"/" + folder
        os.makedirs(target)
        os.rename(os.fsencode(keys / "p.parquet"), target + b"/p.parquet")
    assert loader_ids(keys, [("k", "in", ["x", "y"])]).tolist() == [0, 2]
    assert loader_ids(keys, [("k", "!=", "x")]).tolist() == [1, 2]


def test_pruning_counters(lake: Path) -> None:
    ld = shardfeed.Loader(
        lake, columns=["id"], filter=[("date", "==", "2024-01-02"), ("n", ">=", 55)]
    )
    counts = ld.stats()["filter"]
    assert counts["files"] == 15
    assert counts["files_pruned_by_partition"] == 12
    assert counts["row_groups_pruned_by_partition"] == 36
    # n in a date=2024-01-02 file runs 10+c .. 69+c: its first two row groups are < 55.
    assert counts["row_groups_pruned_by_statistics"] == 6
    assert counts["row_groups_read"] == 3
    assert counts["rows_kept"] == len(
        pyarrow_ids(lake, [("date", "==", "2024-01-02"), ("n", ">=", 55)])
    )
    # A filter on partitions only reads nothing.
    only = shardfeed.Loader(lake, columns=["id"], filter=[("country", "==", "US")])
    assert only.stats()["filter"]["row_groups_read"] == 0
    assert only.stats()["filter"]["bytes_read"] == 0


@pytest.mark.parametrize("drop_last", [True, False])
def test_len_is_over_passing_rows(lake: Path, drop_last: bool) -> None:
    filt = [("n", ">", 40)]
    kept = len(pyarrow_ids(lake, filt))
    ld = shardfeed.Loader(lake, NUM, batch_size=10, drop_last=drop_last, filter=filt)
    assert len(ld) == (kept // 10 if drop_last else -(-kept // 10))


def test_empty_result_is_an_empty_loader(lake: Path) -> None:
    ld = shardfeed.Loader(lake, NUM, filter=[("date", "==", "1999-01-01")], drop_last=False)
    assert len(ld) == 0
    with pytest.warns(UserWarning, match="no rows pass the filter"):
        assert list(ld) == []


def stream(lake: Path, **kw: Any) -> str:
    kw.setdefault("filter", [[("x", ">", 3)], [("country", "==", "FR")]])
    return digest(
        shardfeed.Loader(
            lake, NUM, batch_size=8, seed=5, shuffle_window=3, output="numpy", with_sample_id=True,
            transforms=[GaussianNoise("x", 0.1)], fill_null=0, **kw,
        )
    )  # fmt: skip


def test_stream_independent_of_threads(lake: Path) -> None:
    assert stream(lake, num_threads=1) == stream(lake, num_threads=3)


def test_ranks_partition_the_passing_rows(lake: Path) -> None:
    filt = [("n", "<", 30), ("name", "!=", "n1")]
    parts = [loader_ids(lake, filt, rank=r, world_size=3, shuffle_window=2) for r in range(3)]
    lens = [len(shardfeed.Loader(lake, NUM, filter=filt, rank=r, world_size=3, drop_last=False,
                                 batch_size=16)) for r in range(3)]  # fmt: skip
    assert len(set(lens)) == 1
    union = np.concatenate(parts)
    assert len(union) == len(set(union.tolist()))
    np.testing.assert_array_equal(np.sort(union), pyarrow_ids(lake, filt))


def test_a_state_is_refused_once_other_rows_pass_the_filter(tmp_path: Path) -> None:
    """The catalog's fingerprint (paths, row counts, schema) does not see values; with a
    filter the rows of the epoch do, so the state records which rows pass."""
    path = tmp_path / "t.parquet"
    x = np.arange(100, dtype=np.int64)
    pq.write_table(pa.table({"x": x}), path, row_group_size=50)
    kw: dict[str, Any] = dict(batch_size=5, seed=1, output="numpy", filter=[("x", "<", 50)])
    ld = shardfeed.Loader(tmp_path, **kw)
    it = iter(ld)
    next(it)
    state = ld.state_dict()
    shardfeed.Loader(tmp_path, **kw).load_state_dict(state)  # the same rows: resumed
    pq.write_table(pa.table({"x": x % 60}), path, row_group_size=50)  # same row groups
    changed = shardfeed.Loader(tmp_path, **kw)
    assert changed.fingerprint == ld.fingerprint and len(changed) != len(ld)
    with pytest.raises(shardfeed.StateDictError, match="other rows passed its filter"):
        changed.load_state_dict(state)
    # Another filter, or none, is a changed setting, said as one (once: "a file's values
    # changed since", though no file had).
    for other in ([("x", "<", 20)], None):
        with pytest.raises(
            shardfeed.StateDictError, match=r"other settings \(filter: saved \[\[\['x', '<', \[50\]"
        ):
            shardfeed.Loader(tmp_path, **{**kw, "filter": other}).load_state_dict(state)


def test_a_state_from_before_windows_counted_rows_is_refused(tmp_path: Path) -> None:
    """With a filter, windows count only row groups with rows (the order changed where a
    filter prunes some): a state saved before that, which lacks the mark, is refused."""
    pq.write_table(pa.table({"x": np.arange(100)}), tmp_path / "t.parquet", row_group_size=10)
    kw: dict[str, Any] = dict(batch_size=5, output="numpy", filter=[("x", ">=", 50)])
    state = shardfeed.Loader(tmp_path, **kw).state_dict()
    assert state["settings"]["windows"] == "of row groups with rows"
    del state["settings"]["windows"]
    with pytest.raises(shardfeed.StateDictError, match="windows: saved None"):
        shardfeed.Loader(tmp_path, **kw).load_state_dict(state)
    # Without a filter (or shuffle), the order is what it was: no mark.
    assert "windows" not in shardfeed.Loader(tmp_path, batch_size=5).state_dict()["settings"]


def test_pruned_row_groups_are_never_decoded(tmp_path: Path) -> None:
    """A window read whole decoded every row group in it, those the filter pruned too
    (files of other partitions read and decoded for nothing), with more than one thread."""
    for k in range(8):
        (tmp_path / f"k={k}").mkdir()
        pq.write_table(pa.table({"x": np.arange(64 * 4)}), tmp_path / f"k={k}" / "p.parquet",
                       row_group_size=64)  # fmt: skip
    for threads in (1, 2, 4):
        ld = shardfeed.Loader(tmp_path, batch_size=32, output="numpy", num_threads=threads,
                              shuffle_window=4, filter=[("k", "==", 3)], columns=["x"])  # fmt: skip
        assert sum(len(b["x"]) for b in ld) == 256
        kept = set(range(12, 16))  # files in path order, 4 row groups each: k=3's
        decoded = ld.stats()["decoded_row_groups"]
        assert sorted(decoded) == sorted(kept), threads


def test_resume_in_the_middle(lake: Path) -> None:
    kw: dict[str, Any] = dict(
        columns=NUM, batch_size=8, seed=3, output="numpy", with_sample_id=True, fill_null=0,
        filter=[("date", ">=", "2024-01-03")],
    )  # fmt: skip
    whole = list(shardfeed.Loader(lake, **kw))
    first = shardfeed.Loader(lake, **kw)
    it = iter(first)
    head = [next(it) for _ in range(5)]
    state = first.state_dict()
    assert state["settings"]["filter"] == [[["date", ">=", ["2024-01-03"]]]]
    json.dumps(state)
    second = shardfeed.Loader(lake, **kw)
    second.load_state_dict(state)
    assert digest(head + list(second)) == digest(whole)
    other = shardfeed.Loader(lake, **{**kw, "filter": [("date", ">=", "2024-01-04")]})
    with pytest.raises(shardfeed.StateDictError):
        other.load_state_dict(state)


def test_sample_ids_and_augmentation_do_not_depend_on_the_filter(lake: Path) -> None:
    kw: dict[str, Any] = dict(
        columns=["x"], batch_size=1000, shuffle=False, output="numpy", drop_last=False,
        with_sample_id=True, fill_null=0, transforms=[GaussianNoise("x", 1.0)],
    )  # fmt: skip
    full = next(iter(shardfeed.Loader(lake, **kw)))
    part = next(iter(shardfeed.Loader(lake, filter=[("n", ">", 30)], **kw)))
    ids = part["sample_id"]
    np.testing.assert_array_equal(part["x"], full["x"][ids])


def test_cache_is_used_and_a_damaged_one_rebuilt(lake: Path, tmp_path: Path) -> None:
    filt = [("n", ">", 20), ("country", "!=", "CA")]
    cache = tmp_path / "cache"
    first = shardfeed.Loader(lake, NUM, filter=filt, cache_dir=cache)
    files = list((cache / "filters").iterdir())
    assert len(files) == 1
    expected = first.stats()["filter"]
    assert expected["row_groups_read"] > 0
    ref = stream(lake, filter=filt)
    # Second open: the image is used (no filter column is read again).
    files[0].write_bytes(files[0].read_bytes())
    mtime = files[0].stat().st_mtime_ns
    second = shardfeed.Loader(lake, NUM, filter=filt, cache_dir=cache)
    assert second.stats()["filter"] == expected
    assert files[0].stat().st_mtime_ns == mtime
    assert stream(lake, filter=filt, cache_dir=cache) == ref
    # Damaged (truncated, flipped): ignored, rebuilt, rewritten.
    data = files[0].read_bytes()
    for bad in (data[: len(data) // 2], data[:-1] + bytes([data[-1] ^ 0xFF]), b""):
        files[0].write_bytes(bad)
        assert stream(lake, filter=filt, cache_dir=cache) == ref
        assert files[0].read_bytes() == data
    # A FIFO or a folder in its place: not waited on (reading a FIFO waits for a
    # writer, beyond Ctrl-C), replaced; nothing left behind.
    for make in (os.mkfifo, os.mkdir):
        if files[0].is_file():
            files[0].unlink()
        make(files[0])
        assert stream(lake, filter=filt, cache_dir=cache) == ref
        assert files[0].read_bytes() == data
    assert [p.name for p in (cache / "filters").iterdir()] == [files[0].name]


def test_the_filter_cache_leaves_no_temporary_when_it_cannot_write(
    lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "deep" / "cache"
    filt = [("n", ">", 25)]

    def full_disk(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("shardfeed._filter.os.replace", full_disk)
    for _ in range(2):
        ld = shardfeed.Loader(lake, NUM, filter=filt, cache_dir=cache)
        assert ld.stats()["filter"]["rows_kept"] > 0  # a full disk only costs the re-read
    assert list((cache / "filters").iterdir()) == []
    assert oct(cache.stat().st_mode & 0o777) == "0o700"  # made by the filter cache: 0700 too
    assert oct((tmp_path / "deep").stat().st_mode & 0o777) == "0o700"


BAD: list[tuple[Any, str]] = [
    ([("nope", "==", 1)], "nope"),
    ([("n", "~", 1)], "unknown operator"),
    ([("n", "==", "3")], "numeric"),
    ([("name", "==", 3)], "string"),
    ([("day", ">", "yesterday")], "ISO date"),
    ([("n", "in", 3)], "list of values"),
    ("n > 3", "non-empty list"),
    ([], "non-empty list"),
    ([("n", "==")], r"tuple, got \('n', '=='\) \(2 items\)"),
    (("n", "==", 3), r"list of \(column, op, value\) tuples: \[\('n', '==', 3\)\]"),
    (("n", "=="), r"list of \(column, op, value\) tuples, got \('n', '=='\) \(2 items\)"),
    ([("n", "==", 1), ("n", ">")], r"tuple, got \('n', '>'\) \(2 items\)"),
    ([[("n", "==", 1)], ("n", "<", 3)], r"mixes OR terms .* with a bare tuple \('n', '<', 3\)"),
    ([[("n", "==", 1)], ("n", ">")], r"tuple, got \[\('n', '==', 1\)\] \(1 items\)"),
    ([("n", "==", 1), []], r"tuple, got \[\] \(0 items\)"),
    ([[("n", "==", 1)], []], "non-empty list"),
]


@pytest.mark.parametrize(("filt", "match"), BAD, ids=[m for _, m in BAD])
def test_bad_filters(lake: Path, filt: Any, match: str) -> None:
    with pytest.raises((shardfeed.InvalidArgumentError, TypeError, KeyError), match=match):
        shardfeed.Loader(lake, NUM, filter=filt)


def test_a_filter_column_the_dataset_lacks_is_named_as_columns_names_it(tmp_path: Path) -> None:
    """ColumnNotFoundError (a KeyError) with the columns there are, as for columns=; a
    struct's fields by their path; a type that cannot be filtered on is named."""
    path = tmp_path / "s.parquet"
    table = pa.table({"id": [1, 2], "user": [{"age": 3}, {"age": 4}], "fb": [b"ab", b"cd"]})
    pq.write_table(table.cast(table.schema.set(2, pa.field("fb", pa.binary(2)))), path)
    with pytest.raises(shardfeed.ColumnNotFoundError, match=r"no such column.*columns: id, us"):
        loader_ids(path, [("nope", "==", 1)])
    with pytest.raises(shardfeed.ColumnNotFoundError, match=r"'user' is a struct.*'user\.age'"):
        loader_ids(path, [("user", "==", 1)])
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"of type fixed_size_binary\[2\]"):
        loader_ids(path, [("fb", "==", "ab")])
    assert loader_ids(path, [("user.age", ">", 3)]).tolist() == [2]


@pytest.mark.parametrize("stats", [True, False])
@pytest.mark.parametrize("units", [("ms", "us"), ("s", "ms"), ("us", "ns")])
def test_durations_in_other_units_per_file_are_pruned_in_their_own_unit(
    tmp_path: Path, stats: bool, units: tuple[str, str]
) -> None:
    """A duration's unit is only in the file's Arrow schema (Parquet stores a plain
    int64): promoted across files, each file's statistics are compared in its own unit."""
    seconds = [1, 2, 3]
    for name, unit in zip("ab", units, strict=True):
        per = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
        ids = [i + (0 if name == "a" else 3) for i in range(3)]
        durations = pa.array([v * per for v in seconds], pa.duration(unit))
        pq.write_table(
            pa.table({"id": ids, "du": durations}),
            tmp_path / f"{name}.parquet",
            write_statistics=stats,
            row_group_size=1,
        )
    for filt, want in [
        ([("du", "==", dt.timedelta(seconds=2))], [1, 4]),
        ([("du", ">=", dt.timedelta(seconds=2))], [1, 2, 4, 5]),
        ([("du", "in", [dt.timedelta(seconds=1), dt.timedelta(seconds=3)])], [0, 2, 3, 5]),
        ([("du", "<", dt.timedelta(milliseconds=1500))], [0, 3]),
    ]:
        assert loader_ids(tmp_path, filt).tolist() == want, filt


def test_info_filter(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    filt = json.dumps([["date", "<=", "2024-01-02"], ["n", ">", 60]])
    assert cli.main(["info", str(lake), "--filter", filt]) == 0
    info = json.loads(capsys.readouterr().out)["filter"]
    assert info["files_pruned_by_partition"] == 9
    assert info["rows_kept"] == len(
        pyarrow_ids(lake, [("date", "<=", "2024-01-02"), ("n", ">", 60)])
    )


OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]


def predicates() -> st.SearchStrategy[tuple[str, str, Any]]:
    def one(column: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.sampled_from(OPS).flatmap(
            lambda op: st.tuples(
                st.just(column),
                st.just(op),
                st.lists(values, min_size=1, max_size=3) if "in" in op else values,
            )
        )

    return st.one_of(
        one("n", st.integers(-2, 80)),
        one("x", st.sampled_from([0.0, 0.5, 2.0, 4.5, 8.0])),
        one("name", st.sampled_from(["n0", "n3", "n6", "zz"])),
        one("date", st.sampled_from(DATES)),
        one("country", st.sampled_from(COUNTRIES)),
    )


@pytest.mark.filterwarnings("ignore:every epoch has no batches")  # a filter passing none
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.lists(predicates(), min_size=1, max_size=3), min_size=1, max_size=2))
def test_random_filters_match_pyarrow(lake: Path, filt: list[list[tuple[str, str, Any]]]) -> None:
    np.testing.assert_array_equal(loader_ids(lake, filt, batch_size=64), pyarrow_ids(lake, filt))


def test_dataloader_workers_give_the_loaders_filtered_stream(lake: Path) -> None:
    """Workers reopen the dataset after the fork; the filter's image travels with the
    TorchDataset, so every worker keeps the same rows and the stream is the Loader's."""
    import torch

    kw: dict[str, Any] = dict(
        columns=NUM, batch_size=8, seed=4, output="numpy", with_sample_id=True, fill_null=0,
        drop_last=False, filter=[("date", ">=", "2024-01-02"), ("n", "<", 40)],
    )  # fmt: skip
    reference = digest(shardfeed.Loader(lake, **kw))
    for workers in (0, 2):
        ds = shardfeed.TorchDataset(lake, **kw)
        got = digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
        assert got == reference, workers


def test_damaged_filter_column_is_invalid_data_naming_the_file(tmp_path: Path) -> None:
    """Bad bytes met while reading the filter columns are the data's fault, not storage's."""
    path = tmp_path / "a.parquet"
    table = pa.table({"y": np.arange(1000), "x": np.arange(1000) * 1.0})
    pq.write_table(table, path, row_group_size=500, compression="snappy", use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = bytearray(path.read_bytes())
    for i in range(chunk.data_page_offset + 20, chunk.data_page_offset + 60):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(shardfeed.InvalidDataError, match=r"a\.parquet.*row group 0") as err:
        shardfeed.Loader(tmp_path, batch_size=10, filter=[("y", "<", 700)])
    assert not isinstance(err.value, OSError)


@pytest.fixture(scope="module")
def evolved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Files that lack a filtered column (it reads as null) and a file column `k` that
    shadows the partition key `k` (the folder's value fills in where a file lacks it);
    with the table of what the loader delivers, built by hand."""
    root = tmp_path_factory.mktemp("evolved") / "lake"
    files = {
        "k=5/a.parquet": pa.table({"id": [0, 1, 2], "k": [100, None, 5], "x": [0.5, None, 2.0]}),
        "k=6/b.parquet": pa.table({"id": [3, 4], "x": [1.0, 4.5]}),  # k from the folder
        "k=7/c.parquet": pa.table({"id": [5, 6, 7], "k": [7, 8, None]}),  # no x
        "k=8/d.parquet": pa.table({"id": [8, 9]}),  # neither
    }
    parts = []
    for rel, table in files.items():
        (root / rel).parent.mkdir(parents=True)
        pq.write_table(table, root / rel, row_group_size=2)
        folder_k = int(rel.split("/")[0].split("=")[1])
        n = table.num_rows
        k = table["k"] if "k" in table.column_names else pa.array([folder_k] * n, pa.int64())
        x = table["x"] if "x" in table.column_names else pa.nulls(n, pa.float64())
        parts.append(pa.table({"id": table["id"], "k": k.cast(pa.int64()), "x": x}))
    return root, pa.concat_tables(parts)


@pytest.mark.filterwarnings("ignore:every epoch has no batches")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.sampled_from(OPS).flatmap(
                    lambda op: st.tuples(
                        st.just("k"),
                        st.just(op),
                        st.lists(st.sampled_from([5, 6, 7, 8, 100, 0]), min_size=1, max_size=2)
                        if "in" in op
                        else st.sampled_from([5, 6, 7, 8, 100, 0]),
                    )
                ),
                st.sampled_from(OPS).flatmap(
                    lambda op: st.tuples(
                        st.just("x"),
                        st.just(op),
                        st.lists(st.sampled_from([0.5, 1.0, 9.0]), min_size=1, max_size=2)
                        if "in" in op
                        else st.sampled_from([0.5, 1.0, 9.0]),
                    )
                ),
            ),
            min_size=1,
            max_size=2,
        ),
        min_size=1,
        max_size=2,
    )
)
def test_filters_on_missing_and_shadowing_columns_see_the_delivered_values(
    evolved: tuple[Path, pa.Table], filt: list[list[tuple[str, str, Any]]]
) -> None:
    """A filter sees each row as the loader delivers it: null where a file lacks the
    column (only `not in` passes), the folder's value where a file lacks a column that
    shadows a partition key.  (Once a crash: `not in` on a column a file lacks.)"""
    root, delivered = evolved
    expected = delivered.filter(pq.filters_to_expression(filt))["id"].to_numpy()
    np.testing.assert_array_equal(loader_ids(root, filt), np.sort(expected))


UNIT_SECONDS = {"s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6),
                "ns": Fraction(1, 10**9)}  # fmt: skip
I64 = [
    -(2**63),
    -(2**63) + 1,
    -(2**53) - 1,
    -1,
    0,
    1,
    2**53 + 1,
    2**62,
    2**63 - 2,
    2**63 - 1,
    None,
    7,
]
U64 = [0, 1, 2**53 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1, None, 5, 6, 7]
TICKS = [-3, -2, -1, 0, 1, 2, 3, 1000, 1500, None, 10**9, 2]


@pytest.fixture(scope="module")
def exact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Integers at the ends of int64 and uint64 and past 2^53; timestamps of every unit."""
    path = tmp_path_factory.mktemp("exact") / "t.parquet"
    columns = {"id": pa.array(range(len(I64)), pa.int64()), "i64": pa.array(I64, pa.int64()),
               "u64": pa.array(U64, pa.uint64())}  # fmt: skip
    for unit in UNIT_SECONDS:
        columns[f"ts_{unit}"] = pa.array(TICKS, pa.timestamp(unit))
    pq.write_table(pa.table(columns), path, row_group_size=4)  # statistics prune too
    return path


def exact_values() -> st.SearchStrategy[tuple[str, Any, Any]]:
    """(column, filter value, the value as an exact number for the check)."""
    big = st.one_of(
        st.integers(-(2**65), 2**65),
        st.sampled_from([v + d for v in I64 + U64 if v is not None for d in (-1, 0, 1)]),
    )
    number = st.one_of(
        big.map(lambda v: (v, Fraction(v))),
        st.floats(allow_nan=False).map(lambda v: (v, v)),
        st.sampled_from([0.5, 1.5, 2.5, 2.0**63, 2.0**64]).map(lambda v: (v, Fraction(v))),
    )
    ints = st.tuples(st.sampled_from(["i64", "u64"]), number).map(lambda t: (t[0], *t[1]))

    def instant(unit: str) -> st.SearchStrategy[tuple[str, Any, Any]]:
        column = f"ts_{unit}"
        as_datetime64 = st.tuples(st.integers(-5, 2000), st.sampled_from(list(UNIT_SECONDS))).map(
            lambda t: (column, np.datetime64(t[0], t[1]), t[0] * UNIT_SECONDS[t[1]])
        )
        as_iso = st.integers(-(5 * 10**9), 5 * 10**9).map(  # ISO text with nanosecond digits
            lambda ns: (column, str(np.datetime64(ns, "ns")), Fraction(ns, 10**9))
        )
        return st.one_of(as_datetime64, as_iso)

    return st.one_of(ints, *[instant(u) for u in UNIT_SECONDS])


def exact_passes(x: Any, op: str, values: list[Any]) -> bool:
    if x is None:
        return op == "not in"
    if op == "in":
        return any(x == v for v in values)
    if op == "not in":
        return all(x != v for v in values)
    v = values[0]
    return {"==": x == v, "!=": x != v, "<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v}[op]


@pytest.mark.filterwarnings("ignore:every epoch has no batches")
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from(OPS), exact_values()), min_size=1, max_size=2))
def test_integer_and_time_comparisons_are_exact(exact: Path, preds: list[Any]) -> None:
    """Filter values finer than the column's unit (or than microseconds, in ISO text),
    floats against integers, integers past int64 or below uint64: each compares as
    the exact number it is.  (Once: truncated to the unit; uint64 above 2^63 failed.)"""
    filt, checks = [], []
    for op, (column, value, number) in preds:
        filt.append((column, op, [value] if "in" in op else value))
        checks.append((column, op, number))
    table = pq.read_table(exact)  # (Parquet has no seconds: ts_s comes back in ms)
    data = {c: table[c].to_pylist() for c in ("id", "i64", "u64")}
    for unit in UNIT_SECONDS:
        column = table[f"ts_{unit}"]
        seconds = UNIT_SECONDS[column.type.unit]
        data[f"ts_{unit}"] = [None if t is None else t * seconds
                              for t in column.cast(pa.int64()).to_pylist()]  # fmt: skip
    expected = []
    for row, row_id in enumerate(data["id"]):
        ok = True
        for column, op, number in checks:
            ok = ok and exact_passes(data[column][row], op, [number])
        if ok:
            expected.append(row_id)
    np.testing.assert_array_equal(loader_ids(exact, filt), np.array(expected, np.int64))


@pytest.mark.parametrize("statistics", [True, False])
def test_float_zeros_and_nans_pass_as_pyarrow_says_with_or_without_statistics(
    tmp_path: Path, statistics: bool
) -> None:
    """A set of values held one of -0.0 and 0.0 (a Python set keeps the first), and a
    row group whose statistics say min = max = 1.0 was pruned for != and not in,
    though statistics leave NaN out and NaN != 1.0. The rows are pyarrow's in memory,
    whatever the writer's statistics."""
    x = [0.0, -0.0, 1.0, float("nan"), 1.0, None]
    table = pa.table({"id": np.arange(len(x)), "x": pa.array(x, pa.float64())})
    # Row groups of two rows: [0.0, -0.0], [1.0, nan] (stats 1.0..1.0), [1.0, null].
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=2, write_statistics=statistics)
    for filt in (
        [("x", "in", [-0.0, 0.0])],
        [("x", "in", [0.0, -0.0])],
        [("x", "not in", [-0.0, 0.0])],
        [("x", "!=", 1.0)],
        [("x", "not in", [1.0])],
        [("x", "==", 0.0)],
    ):
        # pyarrow's filter in memory: no statistics in the way.
        want = pads.dataset(table).to_table(filter=pq.filters_to_expression(filt))["id"]
        np.testing.assert_array_equal(
            loader_ids(tmp_path, filt), np.sort(want.to_numpy()), err_msg=str(filt)
        )


def test_an_integer_float64_cannot_hold_is_refused_on_a_float_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [0, 1], "x": [2.0**53, 1.0]}), tmp_path / "f.parquet")
    for op in ("==", "<", "!=", "in"):
        value = [2**53 + 1] if op == "in" else 2**53 + 1
        with pytest.raises(shardfeed.InvalidArgumentError, match="no exact float64 value"):
            loader_ids(tmp_path, [("x", op, value)])
    # Those it holds compare exactly, as before.
    assert loader_ids(tmp_path, [("x", "==", 2**53)]).tolist() == [0]


def test_a_file_rewritten_at_its_size_is_filtered_again(tmp_path: Path) -> None:
    """The filter cache was keyed by paths, sizes and row groups: a file rewritten at
    its size with other values was served the old file's pass bitmaps (x > 2 kept
    rows holding 2 and 1)."""
    src, cache = tmp_path / "data", tmp_path / "cache"
    src.mkdir()

    def write(x: list[int]) -> None:
        pq.write_table(pa.table({"id": np.arange(4), "x": np.array(x, np.int64)}),
                       src / "f.parquet", use_dictionary=False, compression="none")  # fmt: skip

    def kept() -> list[int]:
        ld = shardfeed.Loader(src, columns=["x"], batch_size=1, shuffle=False, drop_last=False,
                              output="numpy", filter=[("x", ">", 2)], cache_dir=cache)  # fmt: skip
        return [int(b["x"][0]) for b in ld]

    write([1, 2, 3, 4])
    size = (src / "f.parquet").stat().st_size
    assert kept() == [3, 4]
    write([4, 3, 2, 1])  # same size; a new inode or change time even within a clock tick
    assert (src / "f.parquet").stat().st_size == size
    assert kept() == [4, 3]


def test_string_view_columns_filter_and_pass_filters(tmp_path: Path) -> None:
    """delta-rs and polars write strings as string_view: a filter on another column
    failed ('array_take' has no string_view kernel) and one on such a column was
    refused."""
    table = pa.table({"id": np.arange(4), "s": pa.array(["a", "b", "c", None], pa.string_view())})
    pq.write_table(table, tmp_path / "f.parquet")
    from shardfeed.transforms import Vocabulary

    ld = shardfeed.Loader(tmp_path, columns=["id", "s"], batch_size=4, shuffle=False,
                          drop_last=False, output="numpy", filter=[("id", "!=", 1)],
                          transforms=[Vocabulary("s", values=["a", "b", "c"])])  # fmt: skip
    (batch,) = list(ld)
    assert batch["id"].tolist() == [0, 2, 3] and batch["s"].tolist() == [1, 3, 0]
    assert loader_ids(tmp_path, [("s", "in", ["a", "c"])]).tolist() == [0, 2]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cells=st.lists(st.decimals(-1000, 1000, places=3, allow_nan=False), min_size=1, max_size=40),
    bound=st.decimals(-1000, 1000, places=4, allow_nan=False),
    op=st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
)
def test_a_decimal_column_takes_decimal_values_as_its_rows_are_delivered(
    tmp_path: Path, cells: list[Any], bound: Any, op: str
) -> None:
    """A Decimal bound is compared as its nearest float64, as each row is delivered."""
    path = tmp_path / "d.parquet"
    pq.write_table(
        pa.table({"i": np.arange(len(cells)), "d": pa.array(cells, pa.decimal128(9, 3))}), path
    )
    compare = {
        "==": np.equal,
        "!=": np.not_equal,
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
    }[op]
    delivered = np.array([float(c) for c in cells])
    expected = np.flatnonzero(compare(delivered, float(bound)))
    with shardfeed.Loader(
        path, batch_size=64, shuffle=False, drop_last=False, output="numpy", columns=["i"],
        filter=[("d", op, bound)],
    ) as ld:  # fmt: skip
        got = np.concatenate([b["i"] for b in ld]) if len(expected) else np.array([], np.int64)
    np.testing.assert_array_equal(got, expected)


TIME_TYPES = {"t_ms": pa.time32("ms"), "t_us": pa.time64("us"), "t_ns": pa.time64("ns")}
DURATION_TYPES = {f"d_{unit}": pa.duration(unit) for unit in UNIT_SECONDS}
# Seconds, exactly; each column holds those its unit can.
SPANS = [Fraction(0), Fraction(1, 10**9), Fraction(1, 1000), Fraction(3, 2), Fraction(59),
         Fraction(3600), Fraction(86_399), None, Fraction(7, 10**6)]  # fmt: skip


@pytest.fixture(scope="module")
def clocks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Any]]]:
    """Times of day and durations of every unit, with the seconds each row holds."""
    path = tmp_path_factory.mktemp("clocks") / "t.parquet"
    columns: dict[str, Any] = {"id": pa.array(range(len(SPANS)), pa.int64())}
    seconds: dict[str, list[Any]] = {}
    for name, type_ in {**TIME_TYPES, **DURATION_TYPES}.items():
        per_second = 1 / UNIT_SECONDS[type_.unit]
        ticks = [None if s is None else int(s * per_second) for s in SPANS]  # truncated
        columns[name] = pa.array(ticks, type_)
        seconds[name] = [None if t is None else t / per_second for t in ticks]
    pq.write_table(pa.table(columns), path, row_group_size=4)  # statistics prune too
    return path, seconds


def clock_values(column: str) -> st.SearchStrategy[tuple[Any, Fraction]]:
    """(filter value, its exact seconds) in the forms a time or duration column takes."""
    ns = st.one_of(
        st.sampled_from(
            [max(0, int(s * 10**9) + d) for s in SPANS if s is not None for d in (-1, 0, 1)]
        ),
        st.integers(0, 86_399 * 10**9),
    )
    unit = UNIT_SECONDS[{**TIME_TYPES, **DURATION_TYPES}[column].unit]
    count = st.integers(-2, 10**6).map(lambda n: (n, n * unit))  # an integer: the unit's count
    if column in TIME_TYPES:
        as_time = ns.map(lambda n: n // 1000).map(
            lambda us: (
                dt.time(us // 3_600_000_000, us // 60_000_000 % 60, us // 10**6 % 60, us % 10**6),
                Fraction(us, 10**6),
            )
        )
        as_iso = ns.map(  # nanosecond digits, beyond what datetime.time keeps
            lambda n: (
                f"{n // 3_600_000_000_000:02}:{n // 60_000_000_000 % 60:02}:"
                f"{n // 10**9 % 60:02}.{n % 10**9:09}",
                Fraction(n, 10**9),
            )
        )
        return st.one_of(as_time, as_iso, count)
    as_timedelta = ns.map(
        lambda n: (dt.timedelta(microseconds=n // 1000), Fraction(n // 1000, 10**6))
    )
    as_numpy = ns.map(lambda n: (np.timedelta64(n, "ns"), Fraction(n, 10**9)))
    return st.one_of(as_timedelta, as_numpy, count)


@pytest.mark.filterwarnings("ignore:every epoch has no batches")
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_time_and_duration_columns_take_times_and_timedeltas_exactly(
    clocks: tuple[Path, dict[str, list[Any]]], data: st.DataObject
) -> None:
    """A time-of-day column takes datetime.time and ISO text, a duration column
    timedelta and numpy.timedelta64 (both still integer counts of their unit), each
    compared as the exact span it is.  (Once: "a numeric column takes numbers".)"""
    path, seconds = clocks
    filt, checks = [], []
    for _ in range(data.draw(st.integers(1, 2))):
        column = data.draw(st.sampled_from(sorted(seconds)))
        op = data.draw(st.sampled_from(OPS))
        value, exact = data.draw(clock_values(column))
        filt.append((column, op, [value] if "in" in op else value))
        checks.append((column, op, exact))
    expected = [row for row in range(len(SPANS))
                if all(exact_passes(seconds[c][row], op, [v]) for c, op, v in checks)]  # fmt: skip
    np.testing.assert_array_equal(loader_ids(path, filt), np.array(expected, np.int64))


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("t_ms", dt.timedelta(1), "a time column takes datetime.time"),
        ("t_ms", "noon", "not an ISO time of day"),
        ("t_ms", dt.time(1, tzinfo=dt.timezone.utc), "times of day without a zone"),
        ("d_ms", dt.time(1), "a duration column takes datetime.timedelta"),
        ("d_ms", np.timedelta64(1, "M"), "no fixed length"),
        ("d_ms", np.timedelta64("NaT"), "NaT is not a filter value"),
    ],
)
def test_times_and_durations_of_the_wrong_kind_are_named(
    clocks: tuple[Path, dict[str, list[Any]]], column: str, value: Any, match: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        loader_ids(clocks[0], [(column, "==", value)])
