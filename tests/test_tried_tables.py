"""Tables as users' writers leave them, found by trying shardfeed on them: a filter
sees each file's values as they are delivered (units promoted across files, decimals
as the nearest float64), a column with no common type cannot be filtered, Spark's
INT96 dates outside the nanosecond range are read exactly, and a file reached by two
paths in one folder is read once."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import Clip


def rows(source, **kw) -> dict[str, np.ndarray]:
    ld = shardfeed.Loader(
        source, shuffle=False, output="numpy", drop_last=False, batch_size=5, **kw
    )
    batches = list(ld)
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_a_filter_compares_timestamps_in_the_promoted_unit(tmp_path):
    """One file in ms, one in us: the column is us in the batches, and the filter
    compares both files' values as us (it compared the ms file's raw counts)."""
    hours = [dt.datetime(2024, 1, 1) + dt.timedelta(hours=h) for h in range(6)]
    pq.write_table(pa.table({"x": range(6), "t": pa.array(hours, pa.timestamp("ms"))}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"x": range(6, 12), "t": pa.array(hours, pa.timestamp("us"))}),
                   tmp_path / "b.parquet")  # fmt: skip
    cut = dt.datetime(2024, 1, 1, 3)
    expected = (
        pads.dataset(tmp_path)
        .to_table(filter=pads.field("t") >= pa.scalar(cut, pa.timestamp("us")))
        .column("x")
        .to_pylist()
    )
    assert expected == [3, 4, 5, 9, 10, 11]
    got = rows(tmp_path, columns=["x", "t"], filter=[("t", ">=", cut)])
    assert got["x"].tolist() == expected
    # Without statistics the same (row by row, not by row-group bounds).
    for name in ("a", "b"):
        table = pq.read_table(tmp_path / f"{name}.parquet")
        pq.write_table(table, tmp_path / f"{name}.parquet", write_statistics=False)
    assert rows(tmp_path, columns=["x"], filter=[("t", ">=", cut)])["x"].tolist() == expected


def test_a_filter_compares_times_in_the_promoted_unit(tmp_path):
    pq.write_table(pa.table({"x": [0, 1, 2], "a": pa.array([0, 1, 2], pa.time32("ms"))}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"x": [3, 4, 5], "a": pa.array([0, 1, 2], pa.time64("us"))}),
                   tmp_path / "b.parquet")  # fmt: skip
    assert rows(tmp_path, columns=["x", "a"])["a"].tolist() == [0, 1000, 2000, 0, 1, 2]
    assert rows(tmp_path, columns=["x"], filter=[("a", ">", 500)])["x"].tolist() == [1, 2]


def test_a_filter_on_an_integer_column_promoted_to_float(tmp_path):
    """int64 in one file (a value above 2^53), float64 in a later one: the filter
    compares the float64 values the batches hold (it raised a cast error)."""
    big = 2**53 + 1
    pq.write_table(pa.table({"v": pa.array([1, big], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"v": pa.array([0.5, 3.0])}), tmp_path / "b.parquet")
    delivered = rows(tmp_path)["v"]
    assert delivered.tolist() == [1.0, float(big), 0.5, 3.0]
    got = rows(tmp_path, filter=[("v", ">=", 3)])["v"]
    assert got.tolist() == [float(big), 3.0]


def test_a_filter_on_a_column_with_no_common_type_is_refused(tmp_path):
    pq.write_table(pa.table({"a": [1, 2], "x": [0, 1]}), tmp_path / "p0.parquet")
    pq.write_table(pa.table({"a": ["002", "n/a"], "x": [2, 3]}), tmp_path / "p1.parquet")
    for op, value in (("==", 2), (">=", 1), ("in", [1, 2])):
        with pytest.raises(shardfeed.SchemaMismatchError, match=r"filter on column 'a'.*p1"):
            shardfeed.Loader(tmp_path, columns=["x"], filter=[("a", op, value)])
    # The other columns still filter.
    assert rows(tmp_path, columns=["x"], filter=[("x", ">", 1)])["x"].tolist() == [2, 3]


def _decimal_strategy():
    @st.composite
    def table(draw):
        precision = draw(st.integers(1, 38))
        scale = draw(st.integers(0, precision))
        bound = 10**precision - 1
        unscaled = draw(st.lists(st.integers(-bound, bound), min_size=1, max_size=20))
        return precision, scale, unscaled

    return table()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_decimal_strategy())
def test_decimals_are_the_nearest_float64(tmp_path_factory, case):
    """Each decimal becomes the float64 nearest its exact value, what float(Decimal)
    gives (Arrow's cast divided by a rounded power of ten: 3.00000 came out as
    3.0000000000000004, and an exact filter missed it)."""
    precision, scale, unscaled = case
    exact = decimal.Context(prec=80)  # the default 28 digits would round 38-digit values
    values = [decimal.Decimal(u).scaleb(-scale, context=exact) for u in unscaled]
    folder = tmp_path_factory.mktemp("dec")
    pq.write_table(
        pa.table({"d": pa.array(values, pa.decimal128(precision, scale))}), folder / "d.parquet"
    )
    got = rows(folder)["d"]
    assert got.tolist() == [float(v) for v in values]


def test_decimal_filters_and_lists_of_decimals(tmp_path):
    vals = [decimal.Decimal(s) for s in ("3.00000", "0.07000", "1.10000", "6.00000")]
    pq.write_table(
        pa.table(
            {
                "r": pa.array(vals, pa.decimal128(20, 5)),
                "l": pa.array([[v] for v in vals], pa.list_(pa.decimal128(20, 5))),
                "w": pa.array(vals, pa.decimal256(50, 5)),
            }
        ),
        tmp_path / "a.parquet",
    )
    got = rows(tmp_path)
    assert got["r"].tolist() == [3.0, 0.07, 1.1, 6.0]
    assert got["l"].ravel().tolist() == [3.0, 0.07, 1.1, 6.0]  # [rows, 1] padded lists
    assert got["w"].tolist() == [3.0, 0.07, 1.1, 6.0]
    assert rows(tmp_path, columns=["r"], filter=[("r", "==", 3)])["r"].tolist() == [3.0]
    assert rows(tmp_path, columns=["r"], filter=[("r", "in", [0.07, 1.1])])["r"].tolist() == [
        0.07,
        1.1,
    ]


def test_int96_dates_outside_the_nanosecond_range_are_exact(tmp_path):
    """Spark writes INT96; its 0001-01-01 and 9999-12-31 placeholders wrapped as
    nanoseconds.  INT96 is read as microseconds, its precision."""
    values = [dt.datetime(1, 1, 1), dt.datetime(1500, 6, 1, 0, 0, 0, 7), dt.datetime(9999, 12, 31)]
    pq.write_table(
        pa.table({"ts": pa.array(values, pa.timestamp("us"))}),
        tmp_path / "spark.parquet",
        use_deprecated_int96_timestamps=True,
    )
    ld = shardfeed.Loader(tmp_path, shuffle=False, output="numpy", batch_size=3)
    (out,) = ld.describe_outputs()
    assert out["unit"] == "us"
    got = next(iter(ld))["ts"]
    assert got.tolist() == [(v - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
                            for v in values]  # fmt: skip
    kept = rows(tmp_path, filter=[("ts", ">", dt.datetime(9000, 1, 1))])["ts"]
    assert kept.tolist() == [got[2]]


def test_a_file_reached_by_two_paths_in_one_folder_is_read_once(tmp_path):
    pq.write_table(pa.table({"x": [0, 1, 2]}), tmp_path / "a.parquet")
    os.symlink(tmp_path / "a.parquet", tmp_path / "b.parquet")
    os.link(tmp_path / "a.parquet", tmp_path / "c.parquet")
    pq.write_table(pa.table({"x": [3]}), tmp_path / "d.parquet")
    assert sorted(rows(tmp_path)["x"].tolist()) == [0, 1, 2, 3]
    ld = shardfeed.Loader(tmp_path)
    assert ld._dataset.files() == ["a.parquet", "d.parquet"]  # the first path of each
    listed = [tmp_path / n for n in ("a.parquet", "b.parquet", "c.parquet", "d.parquet")]
    assert sorted(rows([str(p) for p in listed])["x"].tolist()) == [0, 1, 2, 3]


def test_pandas_timestamps_in_a_filter_keep_their_nanoseconds(tmp_path):
    ts = np.array(["2024-01-01T12:00:00.000000000", "2024-01-01T12:00:00.000000001",
                   "2024-01-01T12:00:00.000000002"], dtype="datetime64[ns]")  # fmt: skip
    pq.write_table(pa.table({"x": [0, 1, 2], "t": pa.array(ts, pa.timestamp("ns"))}),
                   tmp_path / "a.parquet")  # fmt: skip
    at = pd.Timestamp("2024-01-01 12:00:00.000000001")
    assert rows(tmp_path, columns=["x"], filter=[("t", ">=", at)])["x"].tolist() == [1, 2]
    berlin = pd.Timestamp("2024-01-01 13:00:00.000000001", tz="Europe/Berlin")  # 12:00 UTC
    assert rows(tmp_path, columns=["x"], filter=[("t", ">=", berlin)])["x"].tolist() == [1, 2]
    with pytest.raises(shardfeed.InvalidArgumentError, match="NaT"):
        shardfeed.Loader(tmp_path, filter=[("t", ">=", pd.NaT)])


def test_messages_name_the_list_and_both_users_of_an_output_name(tmp_path: Path):
    pq.write_table(pa.table({"tags": pa.array([["a"], ["b", "c"]]), "n": [1, 2]}),
                   tmp_path / "a.parquet")  # fmt: skip
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'tags' has type list<.*string"):
        shardfeed.Loader(tmp_path, columns=["tags"])
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"x": pa.array([[1, 2], [3]]), "x_lengths": [9, 9]}),
                   other / "a.parquet")  # fmt: skip
    with pytest.raises(
        shardfeed.InvalidArgumentError,
        match=r"'x_lengths' is used twice: by the lengths of list column 'x' and by column",
    ):
        shardfeed.Loader(other)
    assert rows(other, columns=["x"])["x_lengths"].tolist() == [2, 1]


def test_a_damaged_footer_schema_is_bad_data_not_a_storage_failure(tmp_path):
    """A damaged embedded Arrow schema was a StorageError (an OSError: retried by
    `except OSError` loops); a column name that is not UTF-8 a bare
    UnicodeDecodeError.  Both are InvalidDataError naming the file."""
    import base64

    path = tmp_path / "schema.parquet"
    pq.write_table(pa.table({"x": np.arange(100.0), "y": np.arange(100)}), path)
    raw = path.read_bytes()
    b64 = pq.ParquetFile(path).metadata.metadata[b"ARROW:schema"]
    flat = bytearray(base64.b64decode(b64))
    flat[len(flat) // 2] ^= 0xFF
    path.write_bytes(raw.replace(b64, base64.b64encode(bytes(flat))))
    with pytest.raises(shardfeed.InvalidDataError, match=r"schema\.parquet.*Arrow") as err:
        shardfeed.Loader(path)
    assert not isinstance(err.value, OSError)

    named = tmp_path / "names" / "bad.parquet"
    named.parent.mkdir()
    pq.write_table(pa.table({"id": np.arange(10), "qz": np.arange(10.0)}), named,
                   store_schema=False)  # fmt: skip
    data = named.read_bytes()
    assert data.count(b"qz") == 2
    named.write_bytes(data.replace(b"qz", b"\xffz"))
    for kw in ({"columns": ["id"]}, {}):
        with pytest.raises(shardfeed.InvalidDataError, match=r"bad\.parquet.*UTF-8"):
            shardfeed.Loader(named.parent, **kw)


def test_a_relative_cache_dir_survives_a_chdir(tmp_path, monkeypatch):
    """Hydra and job launchers change the working directory: a relative cache_dir
    is the folder it named when the loader was made."""
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"x": np.arange(1000.0)}), "a.parquet", row_group_size=250)
    ld = shardfeed.Loader("a.parquet", batch_size=100, output="numpy", cache_dir="cache",
                          cache_decoded=True)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for epoch in (0, 1):
        ld.set_epoch(epoch)
        assert sum(1 for _ in ld) == 10
    assert ld.stats()["decoded_hits"] == 4
    assert not (elsewhere / "cache").exists()
    assert len(list((tmp_path / "cache" / "decoded").glob("*.sfd"))) == 4


def test_a_column_missing_from_a_file_says_so_when_its_nulls_stop_a_batch(tmp_path):
    """Schema evolution: a feature added later reads as nulls in the older files; the
    error blamed a 'null value at row 0' that no one wrote."""
    pq.write_table(pa.table({"a": [1.0, 2.0]}), tmp_path / "old.parquet")
    pq.write_table(pa.table({"a": [3.0], "b": [4.0]}), tmp_path / "new.parquet")
    with pytest.raises(shardfeed.InvalidDataError,
                       match=r"old\.parquet.*'b' \(not in this file.*fill_null"):  # fmt: skip
        rows(tmp_path, stack={"x": ["a", "b"]}, columns=[])
    got = rows(tmp_path, stack={"x": ["a", "b"]}, columns=[], fill_null=0.0)["x"]
    assert got.tolist() == [[3.0, 4.0], [1.0, 0.0], [2.0, 0.0]]


def test_timestamps_written_in_two_zones_are_one_column_of_utc_instants(tmp_path):
    """Files written from sessions in different time zones (pandas, Spark with a session zone)
    hold the same kind of value, UTC instants: they read as one column in UTC, each value the
    instant it was. A naive (wall-clock) timestamp next to a zoned one stays an error."""
    utc = pd.date_range("2024-03-01 12:00", periods=3, freq="h", tz="UTC")
    zone = "America/New_York"
    ny = pd.date_range("2024-03-01 08:00", periods=2, freq="h", tz=zone)
    pq.write_table(pa.table({"x": [0, 1, 2], "t": pa.array(utc, pa.timestamp("ms", tz="UTC"))}),
                   tmp_path / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"x": [3, 4], "t": pa.array(ny, pa.timestamp("us", zone))}),
                   tmp_path / "b.parquet")  # fmt: skip
    got = rows(tmp_path, columns=["x", "t"])
    order = np.argsort(got["x"])
    want = [t.value // 1000 for t in list(utc) + list(ny)]  # microseconds since the epoch
    assert got["t"][order].tolist() == want
    noon = pd.Timestamp("2024-03-01 13:00", tz="Europe/London")  # 13:00 UTC
    assert sorted(rows(tmp_path, columns=["x"], filter=[("t", ">=", noon)])["x"]) == [1, 2, 3, 4]
    naive = tmp_path / "naive"
    naive.mkdir()
    pq.write_table(pa.table({"t": pa.array(utc.tz_localize(None), pa.timestamp("ms"))}),
                   naive / "a.parquet")  # fmt: skip
    pq.write_table(pa.table({"t": pa.array(ny, pa.timestamp("us", zone))}),
                   naive / "b.parquet")  # fmt: skip
    with pytest.raises(shardfeed.SchemaMismatchError, match="no common type"):
        shardfeed.Loader(naive, columns=["t"])


def test_a_date_widened_to_a_naive_timestamp_reads_as_the_timestamp(tmp_path):
    """Delta's type widening turns a date column into timestamp_ntz: older files hold dates,
    newer ones timestamps. They read as one timestamp column, a date its midnight, and a
    filter compares in it; a date next to a zoned timestamp stays an error."""
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    pq.write_table(pa.table({"x": [0, 1], "d": pa.array(days, pa.date32())}),
                   tmp_path / "a.parquet")  # fmt: skip
    later = [dt.datetime(2024, 1, 2, 12, 30), dt.datetime(2024, 1, 3)]
    pq.write_table(pa.table({"x": [2, 3], "d": pa.array(later, pa.timestamp("us"))}),
                   tmp_path / "b.parquet")  # fmt: skip
    got = rows(tmp_path, columns=["x", "d"])
    order = np.argsort(got["x"])
    want = [int(pd.Timestamp(t).value // 1000) for t in [*days, *later]]  # µs since the epoch
    assert got["d"][order].tolist() == want
    noon = dt.datetime(2024, 1, 2, 0, 0)
    assert sorted(rows(tmp_path, columns=["x"], filter=[("d", ">=", noon)])["x"]) == [1, 2, 3]
    zoned = tmp_path / "zoned"
    zoned.mkdir()
    pq.write_table(pa.table({"d": pa.array(days, pa.date32())}), zoned / "a.parquet")
    pq.write_table(pa.table({"d": pa.array(later, pa.timestamp("us", "UTC"))}),
                   zoned / "b.parquet")  # fmt: skip
    with pytest.raises(shardfeed.SchemaMismatchError, match="no common type"):
        shardfeed.Loader(zoned, columns=["d"])


def test_a_polars_int128_column_is_named(tmp_path):
    """Polars writes Int128 as 16 untyped bytes and says int128 in the Arrow schema it
    stores, which no reader maps (pyarrow refuses the file): the error names the column."""
    stored = pa.schema([("big", pa.int64()), ("n", pa.int8())]).serialize().to_pybytes()
    assert stored.count(b"\x40\x00\x00\x00") == 1  # the Int's bitWidth: 64 ...
    as_polars = stored.replace(b"\x40\x00\x00\x00", b"\x80\x00\x00\x00")  # ... made 128
    table = pa.table(
        {"big": pa.array([b"\x01" * 16], pa.binary(16)), "n": pa.array([1], pa.int8())}
    )
    with pq.ParquetWriter(tmp_path / "p.parquet", table.schema, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ARROW:schema": base64.b64encode(as_polars)})
    with pytest.raises(pa.ArrowNotImplementedError):
        pq.read_table(tmp_path / "p.parquet")
    named = r"file 'p.parquet'.*128-bit integer.*for column 'big': 16 bytes"
    with pytest.raises(shardfeed.UnsupportedTypeError, match=named):
        shardfeed.Loader(tmp_path, columns=["n"])


def test_spark_int96_beside_zoned_timestamps_is_one_column_of_instants(tmp_path):
    """Spark writes a timestamp as INT96 (its default) or as TIMESTAMP_MICROS/MILLIS with
    isAdjustedToUTC, which Arrow reads zoned; both are instants in UTC, so a table written
    before and after outputTimestampType changed is one column (it was refused: a naive
    and a zoned timestamp have no common type). A naive file with either stays refused."""
    stamps = [dt.datetime(2024, 3, 1, 12, 30, 15, 123456), dt.datetime(1969, 12, 31, 23, 59)]
    naive_us = pa.array(stamps, pa.timestamp("us"))
    pq.write_table(pa.table({"ts": naive_us}), tmp_path / "a_int96.parquet",
                   use_deprecated_int96_timestamps=True)  # fmt: skip
    zoned_ms = pa.array([s.replace(tzinfo=dt.timezone.utc) for s in stamps],
                        pa.timestamp("ms", tz="UTC"))  # fmt: skip
    pq.write_table(pa.table({"ts": zoned_ms}), tmp_path / "b_millis.parquet")
    (out,) = shardfeed.Loader(tmp_path, output="numpy").describe_outputs()
    assert out["source_type"] == "timestamp[us, tz=UTC]" and out["unit"] == "us"
    (batch,) = list(shardfeed.Loader(tmp_path, batch_size=4, shuffle=False, output="numpy"))
    micros = naive_us.cast(pa.int64()).to_pylist()
    millis_as_micros = [v // 1000 * 1000 for v in micros]  # b holds milliseconds
    assert batch["ts"].tolist() == micros + millis_as_micros
    # INT96 files alone, or with naive files, stay naive (wall clock, as before).
    only = tmp_path / "only"
    only.mkdir()
    (tmp_path / "a_int96.parquet").rename(only / "a_int96.parquet")
    pq.write_table(pa.table({"ts": naive_us}), only / "b_naive.parquet")
    (out,) = shardfeed.Loader(only, output="numpy").describe_outputs()
    assert out["source_type"] == "timestamp[us]"
    # A naive column that is not INT96 beside a zoned one: no common type, as before.
    pq.write_table(pa.table({"ts": zoned_ms}), only / "c_zoned.parquet")
    with pytest.raises(shardfeed.SchemaMismatchError, match=r"c_zoned\.parquet"):
        list(shardfeed.Loader(only, output="numpy"))


def test_list_view_columns_read_as_the_lists_they_are(tmp_path):
    """pyarrow writes a list_view column as a Parquet LIST (only its stored Arrow schema
    says view): it was refused as a type that cannot become a tensor."""
    values = [[1, 2], [], None, [3]]
    pairs = [[[1, 2]], [[3, 4], [5, 6]], [], None]  # fixed-size lists in a view: collapsed
    pair = pa.list_(pa.int32(), 2)
    pq.write_table(pa.table({"lv": pa.array(values, pa.list_view(pa.int32())),
                             "big": pa.array(values, pa.large_list_view(pa.int64())),
                             "fl": pa.array(pairs, pa.list_view(pair))}),
                   tmp_path / "v.parquet")  # fmt: skip
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"lv": pa.array(values, pa.list_(pa.int32())),
                             "big": pa.array(values, pa.large_list(pa.int64())),
                             "fl": pa.array(pairs, pa.list_(pair))}),
                   plain / "v.parquet")  # fmt: skip
    args: dict[str, Any] = dict(batch_size=4, shuffle=False, output="numpy", fill_null=0,
                                transforms=[Clip("lv", min=0, max=2)])  # fmt: skip
    (views,) = list(shardfeed.Loader(tmp_path / "v.parquet", **args))
    (lists,) = list(shardfeed.Loader(plain, **args))
    assert {n: (v.dtype, v.tolist()) for n, v in views.items()} == {
        n: (v.dtype, v.tolist()) for n, v in lists.items()}  # fmt: skip
    assert views["lv_lengths"].tolist() == [2, 0, 0, 1]
    assert views["fl_lengths"].tolist() == [2, 4, 0, 0]
    # A view of structs: each field a list of its own, as for a list of structs.
    items = [[{"a": 1}, {"a": 2}], [], None, [{"a": 3}]]
    for name, kind in (("sv", pa.list_view), ("pl", pa.list_)):
        table = pa.table({"s": pa.array(items, kind(pa.struct([("a", pa.int64())])))})
        pq.write_table(table, tmp_path / f"{name}.parquet")
    fields = [list(shardfeed.Loader(tmp_path / f"{name}.parquet", columns=["s.a"],
                                    **args | {"transforms": []}))
              for name in ("sv", "pl")]  # fmt: skip
    assert [[(k, v.tolist()) for k, v in b.items()] for b in fields[0]] == [
        [(k, v.tolist()) for k, v in b.items()] for b in fields[1]]  # fmt: skip
    assert fields[0][0]["s.a_lengths"].tolist() == [2, 0, 0, 1]


def test_an_absolute_source_needs_no_working_folder(tmp_path, monkeypatch):
    """A job whose working folder was removed under it still reads absolute paths (the
    sources made absolute asked for the working folder whatever they were)."""
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "a.parquet")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    (batch,) = list(shardfeed.Loader(tmp_path / "a.parquet", batch_size=2, shuffle=False,
                                     output="numpy"))  # fmt: skip
    assert batch["x"].tolist() == [1, 2]
