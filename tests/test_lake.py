"""Real data lakes (issue 9): Spark/Hive folders, partitions, schema evolution, types."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import shardfeed
from shardfeed import cli
from shardfeed.transforms import HashBucket, Standardize, Vocabulary

from .conftest import digest, to_numpy, write_dataset


def epoch(source: Any, **kw: Any) -> dict[str, np.ndarray]:
    """The whole epoch in natural order, each output concatenated."""
    kw.setdefault("batch_size", 7)
    ld = shardfeed.Loader(source, shuffle=False, output="numpy", drop_last=False, **kw)
    batches = list(ld)
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def write(path: Path, table: pa.Table, **kw: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kw)
    return path


# -- 1. discovery --------------------------------------------------------------------


def spark_folder(root: Path) -> Path:
    """A Spark job's output: committed files without extension under partition
    folders, a leftover task attempt, markers and checksums."""
    for date, hours in (
        ("2024-01-01", ["03", "04"]),
        ("2024-01-02", ["__HIVE_DEFAULT_PARTITION__"]),
    ):
        for h, hour in enumerate(hours):
            base = 100 * len(list(root.rglob("part-*"))) if root.exists() else 0
            rows = pa.table(
                {
                    "row": np.arange(base, base + 50, dtype=np.int64),
                    "v": np.arange(50, dtype=np.float32) + h,
                }
            )
            folder = root / f"date={date}" / f"hour={hour}"
            write(folder / "part-00000-5e1f.c000", rows)  # no extension, as Spark writes them
            (folder / ".part-00000-5e1f.c000.crc").write_bytes(b"crc checksum, not data")
    dup = pa.table({"row": np.arange(50, dtype=np.int64), "v": np.zeros(50, np.float32)})
    write(
        root
        / "_temporary/0/_temporary/attempt_202401010000_0001_m_000000_1/date=2024-01-01"
        / "hour=03/part-00000.parquet",
        dup,
    )
    (root / "_SUCCESS").write_bytes(b"")
    (root / "README").write_text("not Parquet, not hidden: ignored")
    return root


def test_spark_folder_skips_hidden_paths_and_reads_files_without_extension(tmp_path):
    root = spark_folder(tmp_path / "t")
    ld = shardfeed.Loader(root, columns=["row"], output="numpy")
    assert ld.num_rows == 150  # the _temporary attempt is not read
    got = epoch(root, columns=["row", "v", "hour"], fill_null=-1)
    expected = (
        pads.dataset(root, format="parquet", partitioning="hive", exclude_invalid_files=True)
        .to_table()
        .sort_by("row")
    )
    order = np.argsort(got["row"], kind="stable")
    assert got["row"][order].tolist() == expected["row"].to_pylist()
    assert got["v"][order].tolist() == expected["v"].to_pylist()
    assert got["hour"][order].tolist() == [
        -1 if h is None else h for h in expected["hour"].to_pylist()
    ]
    # An explicit path is always read, whatever its name.
    one = next(root.rglob("part-00000-5e1f.c000"))
    assert shardfeed.Loader(one, columns=["row"], output="numpy").num_rows == 50


def test_folder_with_only_hidden_or_other_files_is_not_found(tmp_path):
    write(tmp_path / "_temporary" / "part-0.parquet", pa.table({"x": [1]}))
    (tmp_path / "data.csv").write_text("x\n1\n")
    with pytest.raises(shardfeed.DatasetNotFoundError, match="no Parquet files"):
        shardfeed.Loader(tmp_path)


# -- 2. Hive partitions --------------------------------------------------------------


def test_partition_columns_match_pyarrow_dataset(tmp_path):
    cities = ["New York", "a/b", "Zürich"]
    row = 0
    for year in (2023, 2024):
        for city in cities:
            quoted = city.replace("%", "%25").replace(" ", "%20").replace("/", "%2F")
            t = pa.table(
                {"row": np.arange(row, row + 20, dtype=np.int64), "city_copy": [city] * 20}
            )
            write(tmp_path / f"year={year}" / f"city={quoted}" / "part-0.parquet", t)
            row += 20
    got = epoch(
        tmp_path,
        columns=["row", "year", "city", "city_copy"],
        transforms=[
            HashBucket("city", num_buckets=2**40),
            HashBucket("city_copy", num_buckets=2**40),
        ],
    )
    expected = pads.dataset(tmp_path, partitioning="hive").to_table().sort_by("row")
    order = np.argsort(got["row"])  # files in path order: city=New%20York < city=Z... < city=a...
    got = {k: v[order] for k, v in got.items()}
    assert got["row"].tolist() == expected["row"].to_pylist()
    assert got["year"].dtype == np.int64
    assert got["year"].tolist() == expected["year"].to_pylist()
    # The decoded partition value hashes like the same string stored in the file.
    assert got["city"].tolist() == got["city_copy"].tolist()
    assert len(set(got["city"].tolist())) == 3
    ld = shardfeed.Loader(
        tmp_path,
        columns=["row", "year"],
        stack={"s": ["row", "year"]},
        output="numpy",
        shuffle=False,
        batch_size=200,
        drop_last=False,
    )
    s = next(iter(ld))["s"]
    assert s.shape == (120, 2) and sorted(map(tuple, s.tolist())) == list(
        zip(expected["row"].to_pylist(), expected["year"].to_pylist(), strict=True)
    )


def test_string_partition_needs_hash_bucket_and_partitioning_can_be_off(tmp_path):
    write(tmp_path / "k=x" / "a.parquet", pa.table({"v": [1, 2]}))
    write(tmp_path / "k=y" / "b.parquet", pa.table({"v": [3]}))
    with pytest.raises(shardfeed.UnsupportedTypeError, match="HashBucket"):
        shardfeed.Loader(tmp_path)
    got = epoch(tmp_path, partitioning=None)
    assert list(got) == ["v"] and got["v"].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="partitioning"):
        shardfeed.Loader(tmp_path, partitioning="directory")


def test_files_must_agree_on_partition_keys(tmp_path):
    write(tmp_path / "a=1" / "b=2" / "f.parquet", pa.table({"v": [1]}))
    write(tmp_path / "a=1" / "g.parquet", pa.table({"v": [1]}))
    with pytest.raises(shardfeed.SchemaMismatchError, match=r"a=1/b=2/f\.parquet.*a=1/g\.parquet"):
        shardfeed.Loader(tmp_path)
    assert shardfeed.Loader(tmp_path, partitioning=None).num_rows == 2


def test_a_glob_has_the_partition_keys_of_its_folder_however_many_values_match(
    tmp_path, monkeypatch, capsys
):
    """`lake/y=*/k=*/*.parquet` lost `y` while every match had y=2024 (the root was the
    matches' common folder), so a filter on it failed and the columns changed the day a
    second year landed.  The keys below the pattern's fixed folder are columns."""
    lake = tmp_path / "lake"
    for k in (1, 2):
        write(lake / "y=2024" / f"k={k}" / "part-0.parquet", pa.table({"x": [k * 10, k * 10 + 1]}))
    folder = epoch(lake)
    assert list(folder) == ["x", "y", "k"]
    for pattern in ("y=*/k=*/*.parquet", "**/*.parquet", "y=*", "*/k=1/*"):
        got = epoch(f"{lake}/{pattern}")
        assert list(got) == ["x", "y", "k"], pattern
        picked = folder["k"] == 1 if "k=1" in pattern else np.ones(4, dtype=bool)
        assert {n: v.tolist() for n, v in got.items()} == {
            n: v[picked].tolist() for n, v in folder.items()
        }, pattern
    got = epoch(f"file://{lake}/y=*/k=*/*.parquet", filter=[("y", "=", 2024)])
    assert got["y"].tolist() == [2024] * 4
    # A relative pattern that starts with a wildcard: its fixed folder is the current one.
    monkeypatch.chdir(lake)
    for pattern in ("y=*/k=*/*.parquet", "**/*.parquet", "./**/*.parquet", "*/k=*/*"):
        assert list(epoch(pattern)) == ["x", "y", "k"], pattern
    # The command line reads it as a Loader does (profile's and info's filters on y).
    assert cli.main(["info", "y=*/k=*/*.parquet", "--filter", '[["y", "=", 2024]]']) == 0
    assert cli.main(["profile", "y=*/k=*/*.parquet", "--columns", "x,y", "--batch-size", "2",
                     "--filter", '[["y", "=", 2024]]', "--json"]) == 0  # fmt: skip
    # A pattern in a partition folder's own name keeps the keys above it out, as a
    # folder source does (the fixed folder is the root).
    assert list(epoch(f"{lake}/y=2024/k=*")) == ["x", "k"]
    # Files named one by one are read below their common folder, as before.
    assert list(epoch([lake / "y=2024" / "k=1" / "part-0.parquet",
                       lake / "y=2024" / "k=2" / "part-0.parquet"])) == ["x", "k"]  # fmt: skip


def test_a_glob_may_match_folders_without_data_and_a_folder_value_must_fit(tmp_path):
    """A glob over partition folders where one is empty or holds only Spark's _SUCCESS
    reads the others (it failed naming the empty folder); a glob that finds no file at all
    still fails.  A folder value that a file lacking the column must take is checked
    against the column's type: k=300 into an int8 column is an error, not 44."""
    lake = tmp_path / "lake"
    write(lake / "k=1" / "part-0.parquet", pa.table({"x": [1, 2]}))
    (lake / "k=2").mkdir()
    (lake / "k=3").mkdir()
    (lake / "k=3" / "_SUCCESS").write_bytes(b"")
    (lake / "k=3" / ".part-0.parquet.crc").write_bytes(b"x")
    (lake / "k=4").mkdir()
    (lake / "k=4" / "README.md").write_text("no data here")
    want = {"x": [1, 2], "k": [1, 1]}
    for source in (f"{lake}/k=*", f"{lake}/*/", f"{lake}/**", f"file://{lake}/k=*"):
        assert {n: v.tolist() for n, v in epoch(source).items()} == want, source
    with pytest.raises(
        shardfeed.DatasetNotFoundError,
        match=r"no Parquet files under .*k=2.*nor under any other path its glob",
    ):
        shardfeed.Loader(f"{lake}/k=[23]")  # fmt: skip
    for named in ([f"{lake}/k=*", lake / "k=2"], [f"file://{lake}/k=*", f"file://{lake}/k=4"],
                  [f"{lake}/k=1", lake / "k=4"]):  # fmt: skip
        with pytest.raises(shardfeed.DatasetNotFoundError, match="no Parquet files under"):
            shardfeed.Loader(named)  # a folder named, not matched, must hold data
    wide = tmp_path / "wide"
    write(wide / "k=300" / "a.parquet", pa.table({"x": [1], "k": pa.array([5], pa.int8())}))
    write(wide / "k=300" / "b.parquet", pa.table({"x": [2]}))
    with pytest.raises(shardfeed.InvalidDataError,
                       match=r"b\.parquet.*column 'k'.*folder's value '300' as int8"):  # fmt: skip
        epoch(wide)


def test_a_dataset_of_zero_row_files_keeps_its_partition_columns(tmp_path):
    """Its folders still say its columns (k was missing: columns=["k"] raised
    ColumnNotFoundError where any data would have it)."""
    write(tmp_path / "k=1" / "a.parquet", pa.table({"x": pa.array([], pa.int64())}))
    loader = shardfeed.Loader(tmp_path, columns=["x", "k"], output="numpy")
    assert [name for name, *_ in loader.outputs] == ["x", "k"]
    with pytest.warns(UserWarning, match="no batches"):
        assert list(loader) == []


def test_one_file_linked_into_two_partition_folders_is_read_under_each(tmp_path):
    """Read once (by inode, as any file reached by two paths) it lost the k=2 rows; under
    Hive partitioning the two paths are rows with other keys, as pyarrow.dataset reads them."""
    lake = tmp_path / "lake"
    write(lake / "k=1" / "part-0.parquet", pa.table({"x": [1, 2, 3]}))
    (lake / "k=2").mkdir()
    (lake / "k=2" / "part-0.parquet").hardlink_to(lake / "k=1" / "part-0.parquet")
    (lake / "k=3").symlink_to(lake / "k=1", target_is_directory=True)
    got = epoch(lake)
    expected = pads.dataset(lake, partitioning="hive").to_table()
    assert sorted(zip(got["k"].tolist(), got["x"].tolist(), strict=True)) == sorted(
        zip(expected["k"].to_pylist(), expected["x"].to_pylist(), strict=True)
    )
    assert len(got["k"]) == 9
    # Without partitioning they are one file reached by three paths: read once.
    assert len(epoch(lake, partitioning=None)["x"]) == 3


def test_a_file_column_wins_over_a_partition_key(tmp_path):
    write(tmp_path / "k=1" / "a.parquet", pa.table({"k": [7, 8], "v": [1, 2]}))
    write(tmp_path / "k=2" / "b.parquet", pa.table({"v": [3]}))  # lacks k: the folder's value
    got = epoch(tmp_path)
    assert list(got) == ["k", "v"]
    assert got["k"].tolist() == [7, 8, 2]


def test_mixed_integer_and_text_values_make_a_string_key(tmp_path):
    write(tmp_path / "part=1" / "a.parquet", pa.table({"v": [1]}))
    write(tmp_path / "part=x" / "b.parquet", pa.table({"v": [2]}))
    ld = shardfeed.Loader(
        tmp_path,
        columns=["v", "part"],
        output="numpy",
        transforms=[HashBucket("part", num_buckets=1000)],
    )
    assert ld.describe_outputs()[1]["source_type"] == "string"


# -- 3. schema evolution -------------------------------------------------------------


def evolved(root: Path, old: pa.Table, new: pa.Table) -> Path:
    write(root / "part-0.parquet", old)
    write(root / "part-1.parquet", new)
    return root


def reference(old: pa.Table, new: pa.Table) -> pa.Table:
    """What pyarrow makes of the same files: permissive promotion by name."""
    return pa.concat_tables([old, new], promote_options="permissive")


ids = np.arange(6, dtype=np.int64)
EVOLUTIONS = {
    "added_column": (pa.table({"id": ids[:3]}), pa.table({"id": ids[3:], "new": [1.5, 2.5, 3.5]})),
    "int32_to_int64": (
        pa.table({"id": ids[:3], "x": pa.array([1, 2, 3], pa.int32())}),
        pa.table({"id": ids[3:], "x": pa.array([2**40, 5, 6], pa.int64())}),
    ),
    "float32_to_float64": (
        pa.table({"id": ids[:3], "x": pa.array([0.5, 1.5, 2.5], pa.float32())}),
        pa.table({"id": ids[3:], "x": pa.array([0.1, 0.2, 0.3], pa.float64())}),
    ),
    "nullable_vs_not": (
        pa.Table.from_arrays(
            [ids[:3], pa.array([1, 2, 3])],
            schema=pa.schema([("id", pa.int64()), pa.field("x", pa.int64(), False)]),
        ),
        pa.table({"id": ids[3:], "x": [4, 5, 6]}),
    ),
    "column_order": (
        pa.table({"id": ids[:3], "x": [1.0, 2.0, 3.0]}),
        pa.table({"x": [4.0, 5.0, 6.0], "id": ids[3:]}),
    ),
    "int_with_float": (
        pa.table({"id": ids[:3], "x": pa.array([1, 2, 3], pa.int16())}),
        pa.table({"id": ids[3:], "x": pa.array([0.5, 1.5, 2.5], pa.float32())}),
    ),
    "list_to_large_list": (
        pa.table({"id": ids[:3], "x": pa.array([[1], [2, 3], []], pa.list_(pa.int32()))}),
        pa.table({"id": ids[3:], "x": pa.array([[4, 5], [6], [7]], pa.large_list(pa.int64()))}),
    ),
}


@pytest.mark.parametrize("case", sorted(EVOLUTIONS))
def test_schema_evolution_matches_pyarrow(tmp_path, case):
    old, new = EVOLUTIONS[case]
    root = evolved(tmp_path, old, new)
    expected = reference(old, new)
    got = epoch(root, fill_null=-1, batch_size=6)
    for name in expected.column_names:
        want = expected[name]
        if pa.types.is_list(want.type) or pa.types.is_large_list(want.type):
            lengths = got[f"{name}_lengths"].tolist()
            rows = [got[name][i, :n].tolist() for i, n in enumerate(lengths)]
            assert rows == want.to_pylist(), name
            continue
        values = [-1 if v is None else v for v in want.to_pylist()]
        assert got[name].tolist() == pytest.approx(values), name
        if case == "int_with_float":  # integers with floats: float64 (53 bits hold int32)
            assert got[name].dtype == (np.int64 if name == "id" else np.float64)
        else:
            assert got[name].dtype == np.dtype(want.type.to_pandas_dtype()), name


def test_string_and_large_string_hash_alike(tmp_path):
    root = evolved(
        tmp_path,
        pa.table({"s": pa.array(["a", "b"], pa.string())}),
        pa.table({"s": pa.array(["b", "a"], pa.large_string())}),
    )
    got = epoch(root, transforms=[HashBucket("s", num_buckets=2**40)])
    assert got["s"][0] == got["s"][3] and got["s"][1] == got["s"][2] and got["s"][0] != got["s"][1]


def test_text_without_the_utf8_annotation_reads_with_text_that_has_it(tmp_path):
    """Old Hive and Impala files store strings as plain BYTE_ARRAY (binary): with files
    that annotate them it was a SchemaMismatchError.  Now the same bytes give the same
    ids, as in a table whose files all say string."""
    texts = [["a", "b", None], ["b", "c", "a"]]
    plain = evolved(tmp_path / "binary", pa.table({"s": pa.array([t and t.encode() for t in
                                                                    texts[0]], pa.binary())}),
                    pa.table({"s": pa.array(texts[1], pa.large_string())}))  # fmt: skip
    text = evolved(tmp_path / "text", pa.table({"s": pa.array(texts[0])}),
                   pa.table({"s": pa.array(texts[1])}))  # fmt: skip
    for t in (HashBucket("s", num_buckets=2**40), Vocabulary("s", values=["a", "b", "c"])):
        got = epoch(plain, transforms=[t], fill_null=-1)["s"].tolist()
        assert got == epoch(text, transforms=[t], fill_null=-1)["s"].tolist()
    assert got == [1, 2, 0, 2, 3, 1]


def test_missing_column_is_null_then_fill_null_decides(tmp_path):
    root = evolved(tmp_path, pa.table({"id": [0, 1]}), pa.table({"id": [2], "extra": [9]}))
    with pytest.raises(shardfeed.InvalidDataError, match=r"part-0\.parquet.*'extra'.*null"):
        list(shardfeed.Loader(root, shuffle=False, output="numpy", drop_last=False))
    assert epoch(root, fill_null=-5)["extra"].tolist() == [-5, -5, 9]


def test_incompatible_column_fails_only_when_used(tmp_path):
    root = evolved(
        tmp_path, pa.table({"id": [0, 1], "bad": [1, 2]}), pa.table({"id": [2], "bad": ["x"]})
    )
    assert epoch(root, columns=["id"])["id"].tolist() == [0, 1, 2]
    for kw in ({}, {"columns": ["bad"]}, {"columns": ["id"], "stack": {"s": ["id", "bad"]}}):
        with pytest.raises(shardfeed.SchemaMismatchError) as e:
            shardfeed.Loader(root, **kw)
        assert "part-0.parquet" in str(e.value) and "part-1.parquet" in str(e.value)
        assert "'bad'" in str(e.value)


def test_two_columns_of_one_name_fail_only_when_used(tmp_path):
    """A file with two columns named ``y`` (pandas and Spark can write one): which one
    is meant cannot be known, so reading ``y`` names the file; leaving it out works."""
    table = pa.Table.from_arrays(
        [pa.array([0, 1, 2]), pa.array([5, 6, 7]), pa.array([-1, -2, -3])], names=["id", "y", "y"]
    )
    root = tmp_path / "dup"
    root.mkdir()
    pq.write_table(table, root / "part-0.parquet")
    assert epoch(root, columns=["id"])["id"].tolist() == [0, 1, 2]
    for kw in ({}, {"columns": ["y"]}, {"columns": ["id"], "stack": {"s": ["id", "y"]}}):
        with pytest.raises(shardfeed.SchemaMismatchError, match=r"part-0\.parquet.*'y'"):
            shardfeed.Loader(root, **kw)


def test_a_column_renamed_only_in_case_fails_only_when_used(tmp_path):
    """Spark and Hive match names case-insensitively, so one column may be spelled
    ``UserId`` in old files and ``userid`` in new ones: each spelling would read as
    nulls in the other's files (and fill_null would hide it), so using either names
    both spellings and a file of each."""
    root = evolved(
        tmp_path,
        pa.table({"id": [0, 1], "UserId": [10, 11]}),
        pa.table({"id": [2], "userid": [12]}),
    )
    assert epoch(root, columns=["id"])["id"].tolist() == [0, 1, 2]
    for kw in ({}, {"columns": ["userid"]}, {"columns": ["UserId"], "fill_null": 0}):
        with pytest.raises(shardfeed.SchemaMismatchError) as e:
            shardfeed.Loader(root, **kw)
        message = str(e.value)
        for part in ("'UserId'", "'userid'", "part-0.parquet", "part-1.parquet", "only in case"):
            assert part in message, (part, message)
    # Two columns of one file that differ in case are two columns.
    both = tmp_path / "both"
    both.mkdir()
    pq.write_table(pa.table({"A": [1], "a": [2]}), both / "f.parquet")
    got = epoch(both)
    assert (got["A"].tolist(), got["a"].tolist()) == ([1], [2])


def test_evolved_stream_is_the_same_for_any_thread_count(tmp_path):
    for i in range(4):
        t = pa.table(
            {
                "id": np.arange(i * 300, (i + 1) * 300, dtype=np.int64).astype(
                    np.int32 if i % 2 else np.int64
                ),
                "x": np.linspace(0, 1, 300, dtype=np.float32 if i < 2 else np.float64),
            }
        )
        if i >= 2:
            t = t.append_column("extra", pa.array(np.arange(300) % 7, pa.int8()))
        write(tmp_path / f"p{i}.parquet", t, row_group_size=64)
    hashes = {
        n: digest(
            shardfeed.Loader(
                tmp_path, batch_size=50, seed=11, num_threads=n, fill_null=0, output="numpy"
            )
        )
        for n in (1, 3)
    }
    assert len(set(hashes.values())) == 1


def test_fingerprint_of_uniform_datasets_is_unchanged(tmp_path):
    # Digests made by the version before schema evolution: state dicts stay valid.
    write_dataset(tmp_path / "std")
    d = tmp_path / "dict"
    t = pa.table({"c": pa.array(["a", "b", "a"]).dictionary_encode(), "x": [1, 2, 3]})
    write(d / "a.parquet", t)
    write(d / "b.parquet", t)
    write(tmp_path / "hive" / "k=1" / "a.parquet", pa.table({"x": [1, 2]}))
    assert shardfeed.Loader(tmp_path / "std").fingerprint == "bfa4142b88e69db7755334962c2138e3"
    fp = shardfeed.Loader(d, columns=["x"]).fingerprint
    assert fp == "05900c10f5cae4f8cfa8992f8db4f75e"
    hive = tmp_path / "hive"
    assert (
        shardfeed.Loader(hive, partitioning=None).fingerprint == "fccc827fe283b2281f3ee22cd3e8bbd1"
    )
    # Partition columns are part of the schema: the digest says so.
    assert shardfeed.Loader(hive).fingerprint != "fccc827fe283b2281f3ee22cd3e8bbd1"


# -- 4. types ------------------------------------------------------------------------

DAYS = [dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 2, 29)]
STAMPS = [
    dt.datetime(1969, 12, 31, 23, 59, 59),
    dt.datetime(1970, 1, 1),
    dt.datetime(2024, 2, 29, 12, 30, 15, 123456),
]


def test_time_types_become_integers_since_the_epoch(tmp_path):
    cols: dict[str, pa.Array] = {
        "d32": pa.array(DAYS, pa.date32()),
        "d64": pa.array(DAYS, pa.date64()),
        "t32": pa.array([0, 1000, 86_399_999], pa.time32("ms")),
        "t64": pa.array([0, 1, 86_399_999_999], pa.time64("us")),
        "dur": pa.array([-5, 0, 10**12], pa.duration("ns")),
    }
    for unit in ("s", "ms", "us", "ns"):
        cols[f"ts_{unit}"] = pa.array(STAMPS, pa.timestamp(unit))
        cols[f"tz_{unit}"] = pa.array(STAMPS, pa.timestamp(unit, tz="America/New_York"))
    table = pa.table(cols)
    write(tmp_path / "t.parquet", table, coerce_timestamps=None, allow_truncated_timestamps=True)
    stored = pq.read_table(tmp_path / "t.parquet")  # what Parquet keeps (s becomes ms)
    got = epoch(tmp_path)
    assert got["d32"].dtype == np.int32 and got["d32"].tolist() == [-1, 0, 19782]
    assert got["d64"].dtype == np.int32 and got["d64"].tolist() == [-1, 0, 19782]
    for name in cols:
        if name.startswith(("ts_", "tz_", "t32", "t64", "dur")):
            width = pa.int32() if name == "t32" else pa.int64()
            expected = stored[name].chunk(0).view(width).to_pylist()
            assert got[name].tolist() == expected, name
    assert got["ts_us"].dtype == np.int64 and got["ts_us"][2] == 1709209815123456
    # With a time zone the values are UTC (Arrow's storage), not wall clock.
    assert got["tz_us"][1] == stored["tz_us"][1].value
    outputs = {o["name"]: o for o in shardfeed.Loader(tmp_path).describe_outputs()}
    assert outputs["d32"] == {
        "name": "d32",
        "dtype": "int32",
        "shape": [],
        "unit": "days",
        "source_type": "date32[day]",
    }
    assert outputs["tz_us"]["unit"] == "us"
    assert outputs["tz_us"]["source_type"] == "timestamp[us, tz=America/New_York]"
    assert outputs["t32"]["dtype"] == "int32" and outputs["t32"]["unit"] == "ms"
    assert outputs["dur"]["unit"] == "ns"


def test_a_stack_of_times_holds_one_unit(tmp_path):
    """Timestamps in ms beside ones in ns, in one stack, read as one scale: refused,
    naming both. Times of one kind in one unit give the stack that unit, as a column
    has; other features beside them, or transforms that make plain numbers or ids of
    them, leave no unit to hold."""
    pq.write_table(pa.table({"ms": pa.array([1_000], pa.timestamp("ms")),
                             "ns": pa.array([10**9], pa.timestamp("ns")),
                             "zoned": pa.array([5], pa.timestamp("ms", tz="UTC")),
                             "wait": pa.array([2], pa.duration("s")),
                             "day": pa.array([3], pa.date32()),
                             "n": pa.array([3], pa.int64())}), tmp_path / "t.parquet")  # fmt: skip

    def stack(*columns: str, **kw: Any) -> dict[str, Any]:
        (out,) = shardfeed.Loader(tmp_path, stack={"x": list(columns)}, columns=[],
                                  **kw).describe_outputs()  # fmt: skip
        return out

    with pytest.raises(shardfeed.InvalidArgumentError,
                       match="column 'ms' counts ms and column 'ns' counts ns"):  # fmt: skip
        stack("ms", "ns")
    for order in (("n", "ms", "ns"), ("ms", "n", "ns"), ("ns", "day", "ms")):  # whatever beside
        with pytest.raises(shardfeed.InvalidArgumentError,
                           match=r"counts (ms|ns) and column '\w+' counts (ns|ms)"):  # fmt: skip
            stack(*order)
    assert stack("ms", "zoned")["unit"] == "ms"
    for columns in (("ms", "n"), ("ms", "wait"), ("day", "ms"), ("day", "n")):
        assert "unit" not in stack(*columns), columns  # features of several kinds
    made_plain = (
        [Standardize("ns", mean=0, std=1)],  # floats
        [HashBucket("ms", num_buckets=5), HashBucket("ns", num_buckets=5)],  # ids
        [Standardize("x", mean=0, std=1)],  # the stack's own
    )
    for transforms in made_plain:
        assert "unit" not in stack("ms", "ns", transforms=transforms), transforms
    # A hashed column alone has no unit either.
    hashed = [HashBucket("ms", num_buckets=5)]
    (out,) = shardfeed.Loader(tmp_path, columns=["ms"], transforms=hashed).describe_outputs()
    assert "unit" not in out


def test_spark_int96_timestamps(tmp_path):
    table = pa.table({"ts": pa.array(STAMPS, pa.timestamp("ns"))})
    write(tmp_path / "t.parquet", table, use_deprecated_int96_timestamps=True)
    assert "int96" in str(pq.ParquetFile(tmp_path / "t.parquet").schema)
    got = epoch(tmp_path)
    # As microseconds, Spark's precision (years 1 to 9999 fit; as ns they would wrap).
    micros = table["ts"].cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    assert got["ts"].tolist() == micros


def test_decimals_become_the_nearest_float64(tmp_path):
    values = [decimal.Decimal("1.10"), decimal.Decimal("-12345678.99"), None]
    table = pa.table(
        {
            "d128": pa.array(values, pa.decimal128(12, 2)),
            "d256": pa.array(values, pa.decimal256(40, 2)),
        }
    )
    write(tmp_path / "t.parquet", table)
    got = epoch(tmp_path, fill_null=0)
    for name in ("d128", "d256"):
        assert got[name].dtype == np.float64
        assert got[name].tolist() == [1.1, -12345678.99, 0.0]


def test_dictionary_columns_are_their_values(tmp_path):
    cats = pa.array(["us", "ca", "us", None, "de"]).dictionary_encode()
    nums = pa.DictionaryArray.from_arrays(
        pa.array([0, 1, 0, 1, 1], pa.int8()), pa.array([2.5, -1.0])
    )
    write(
        tmp_path / "a.parquet", pa.table({"c": cats, "n": nums, "plain": cats.dictionary_decode()})
    )
    assert pa.types.is_dictionary(pq.read_table(tmp_path / "a.parquet")["c"].type)
    got = epoch(
        tmp_path,
        fill_null=-1,
        transforms=[HashBucket("c", num_buckets=2**40), HashBucket("plain", num_buckets=2**40)],
    )
    assert got["n"].tolist() == [2.5, -1.0, 2.5, -1.0, -1.0]
    assert got["c"].tolist() == got["plain"].tolist()


def test_uint64_reaches_torch(tmp_path):
    import torch

    big = [0, 2**63 + 7, 2**64 - 1]
    write(tmp_path / "u.parquet", pa.table({"u": pa.array(big, pa.uint64())}))
    batch = next(iter(shardfeed.Loader(tmp_path, batch_size=3, shuffle=False)))
    assert batch["u"].dtype == torch.uint64
    assert to_numpy(batch["u"]).tolist() == big


def test_uint64_with_a_torch_without_it_names_the_column(monkeypatch):
    import torch
    from shardfeed import _loader

    def refuse(a: np.ndarray) -> Any:
        raise TypeError("can't convert np.ndarray of type numpy.uint64")

    monkeypatch.setattr(torch, "from_numpy", refuse)
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'u'.*uint64"):
        _loader.convert({"u": np.zeros(2, np.uint64)}, "torch")


# -- writers other than pyarrow ------------------------------------------------------


def test_pandas_files(tmp_path):
    pd = pytest.importorskip("pandas")
    for i in range(2):
        df = pd.DataFrame(
            {
                "row": np.arange(i * 4, i * 4 + 4),
                "country": pd.Categorical(["us", "ca", "us", "fr"][:4]),
                "when": pd.date_range("2024-01-01", periods=4, freq="h", tz="UTC"),
                "score": pd.array([1, None, 3, 4], dtype="Int64"),
            }
        )
        df.to_parquet(tmp_path / f"p{i}.parquet", index=False)
    got = epoch(tmp_path, fill_null=-1, transforms=[HashBucket("country", num_buckets=100)])
    expected = pads.dataset(tmp_path).to_table()
    assert got["row"].tolist() == expected["row"].to_pylist()
    assert got["when"].tolist() == expected["when"].cast(pa.int64()).to_pylist()
    assert got["score"].tolist() == [-1 if v is None else v for v in expected["score"].to_pylist()]


def test_a_pandas_index_column_is_not_a_feature_unless_asked_for(tmp_path):
    """A frame filtered or shuffled before to_parquet() keeps its row labels as a column
    __index_level_0__: not handed out as data with columns=None, read when named."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": np.arange(6), "b": np.arange(6.0)}, index=[5, 3, 1, 0, 4, 2])
    frame.to_parquet(tmp_path / "p.parquet")
    assert "__index_level_0__" in pq.read_schema(tmp_path / "p.parquet").names
    assert sorted(epoch(tmp_path)) == ["a", "b"]
    named = epoch(tmp_path, columns=["a", "__index_level_0__"])
    assert named["__index_level_0__"].tolist() == [5, 3, 1, 0, 4, 2]


def test_polars_and_pyarrow_files_together(tmp_path):
    pl = pytest.importorskip("polars")
    pl.DataFrame(
        {"row": [0, 1], "s": ["a", "b"], "x": [1, 2]},
        schema={"row": pl.Int64, "s": pl.Utf8, "x": pl.Int32},
    ).write_parquet(tmp_path / "a.parquet")
    write(
        tmp_path / "b.parquet", pa.table({"row": [2], "s": ["a"], "x": pa.array([7], pa.int64())})
    )
    got = epoch(tmp_path, transforms=[HashBucket("s", num_buckets=2**40)])
    assert got["x"].dtype == np.int64 and got["x"].tolist() == [1, 2, 7]
    assert got["s"][0] == got["s"][2] != got["s"][1]


def test_duckdb_hive_partitioned_copy(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "out"
    duckdb.sql(
        "COPY (SELECT i AS row, i % 3 AS bucket, "
        "DATE '2024-01-01' + CAST(i % 2 AS INTEGER) AS day, "
        "CAST(i AS DECIMAL(10, 2)) / 4 AS price FROM range(60) t(i)) "
        f"TO '{out}' (FORMAT parquet, PARTITION_BY (bucket, day))"
    )
    got = epoch(out, columns=["row", "bucket", "price"])
    expected = pads.dataset(out, partitioning="hive").to_table()
    order = np.argsort(got["row"])
    want = expected.sort_by("row")
    assert got["row"][order].tolist() == want["row"].to_pylist()
    assert got["bucket"][order].tolist() == want["bucket"].to_pylist()
    assert got["price"][order].tolist() == [float(v) for v in want["price"].to_pylist()]


# -- 5. shardfeed info ---------------------------------------------------------------


def test_info_shows_partitions_promotions_and_missing_columns(tmp_path, capsys):
    write(tmp_path / "day=1" / "a.parquet", pa.table({"x": pa.array([1], pa.int32()), "bad": [1]}))
    write(
        tmp_path / "day=2" / "b.parquet",
        pa.table({"x": pa.array([2], pa.int64()), "bad": ["s"], "new": [0.5]}),
    )
    assert cli.main(["info", str(tmp_path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["partitions"] == {"day": "int64"}
    assert info["promoted"] == {"x": {"type": "int64", "from": ["int32", "int64"]}}
    assert info["missing_in_files"] == {"new": 1}
    assert "a.parquet" in info["conflicts"]["bad"] and "b.parquet" in info["conflicts"]["bad"]
    assert info["schema"]["day"] == "int64"
    assert cli.main(["info", "--no-partitioning", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"] == {}
    shutil.rmtree(tmp_path / "day=2")


def test_torch_dataset_reopens_with_the_same_partitioning(tmp_path):
    import pickle

    write(tmp_path / "k=1" / "a.parquet", pa.table({"v": [1, 2]}))
    write(tmp_path / "k=2" / "b.parquet", pa.table({"v": [3]}))
    for partitioning, names in (("hive", ["v", "k"]), (None, ["v"])):
        ds = shardfeed.TorchDataset(
            tmp_path, batch_size=3, shuffle=False, output="numpy", partitioning=partitioning
        )
        assert [o["name"] for o in ds.describe_outputs()] == names
        # A worker process rebuilds the catalog: same partitioning, same fingerprint.
        batch = next(iter(pickle.loads(pickle.dumps(ds))))
        assert list(batch) == names and batch["v"].tolist() == [1, 2, 3]
