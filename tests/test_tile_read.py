"""Stacks decoded a tile at a time (cpp/src/exec/tile_read.h): the same values as NumPy.

A stack whose members are plain numbers of its own dtype, with no transform, is read by
Parquet's column readers a tile of rows at a time straight into the matrix (under a filter,
each tile keeps its passing rows); a member with a null or another type takes the generic
read.  Whatever the writer did (pages,
dictionaries, statistics, compression, row-group and tile boundaries), the matrix must hold
exactly the file's values, nulls filled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import Clip, FillNull

DTYPES = {
    "float32": pa.float32(),
    "float64": pa.float64(),
    "int32": pa.int32(),
    "int64": pa.int64(),
}
FILL = -7


def expected(table: pa.Table, members: list[str], dtype: str, fills: list[int]) -> np.ndarray:
    columns = [table.column(m).fill_null(f).to_numpy() for m, f in zip(members, fills, strict=True)]
    return np.stack(columns, axis=1).astype(dtype, copy=False)


def read_stack(
    path: Path, members: list[str], stack_fill: bool = False, **kw: object
) -> np.ndarray:
    """The stack "s" of `members`; nulls filled by fill_null=FILL, or by the stack's
    FillNull with one value per member (FILL - j)."""
    if stack_fill:
        kw["transforms"] = [FillNull("s", value=[FILL - j for j in range(len(members))])]
    else:
        kw["fill_null"] = FILL
    ld = shardfeed.Loader(
        path,
        batch_size=997,
        shuffle=False,
        drop_last=False,
        columns=[],
        stack={"s": members},
        output="numpy",
        **kw,
    )
    return np.concatenate([b["s"] for b in ld])


def fills(members: list[str], stack_fill: bool) -> list[int]:
    return [FILL - j if stack_fill else FILL for j in range(len(members))]


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, str, dict[str, object], bool]:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    width = draw(st.integers(1, 20))  # across the 16-member groups
    rows = draw(st.integers(1, 5000))  # across the 2048-row tiles
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    distinct = draw(st.sampled_from([3, 1000, None]))  # dictionary-friendly or not
    columns = {}
    for j in range(width):
        if distinct is None:
            values = rng.standard_normal(rows) * 1000
        else:
            values = rng.integers(-distinct, distinct, rows).astype(np.float64)
        array = pa.array(values.astype(dtype))
        nulls = draw(st.sampled_from(["required", "optional", "optional", "some"]))
        if nulls == "some":  # a null, or many, filled as the tile is read
            mask = np.zeros(rows, dtype=bool)
            mask[draw(st.integers(0, rows - 1))] = True
            mask |= rng.random(rows) < draw(st.sampled_from([0.0, 0.01, 0.5, 1.0]))
            array = pa.array(values.astype(dtype), mask=mask)
        field = pa.field(f"c{j}", DTYPES[dtype], nullable=nulls != "required")
        columns[field] = array
    table = pa.Table.from_arrays(list(columns.values()), schema=pa.schema(list(columns)))
    writer: dict[str, object] = {
        "row_group_size": draw(st.sampled_from([rows, 1000, 2049])),
        "data_page_size": draw(st.sampled_from([64, 4096, 1 << 20])),
        "write_statistics": draw(st.booleans()),  # without, a null is found by reading
        "compression": draw(st.sampled_from(["none", "snappy", "zstd"])),
        "data_page_version": draw(st.sampled_from(["1.0", "2.0"])),
    }
    # Dictionary pages (falling back to plain ones mid-chunk when the dictionary
    # outgrows its limit), or the encodings ML data uses for numbers.
    encodings = ["dictionary", "plain", "BYTE_STREAM_SPLIT"]
    if dtype.startswith("int"):
        encodings.append("DELTA_BINARY_PACKED")
    encoding = draw(st.sampled_from(encodings))
    writer["use_dictionary"] = encoding == "dictionary"
    if encoding == "dictionary":
        writer["dictionary_pagesize_limit"] = draw(st.sampled_from([256, 1 << 20]))
    elif encoding != "plain":
        writer["column_encoding"] = encoding
    return table, dtype, writer, draw(st.booleans())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=tables(), keep=st.sampled_from([None, 1, 5, 9]))
def test_tile_read_equals_numpy(
    tmp_path: Path, case: tuple[pa.Table, str, dict[str, object], bool], keep: int | None
):
    """`keep`: a filter k < keep on a column k outside the stack (rows of every tile
    and row group left out, as a filter or a Delta deletion vector leaves them)."""
    table, dtype, writer, stack_fill = case
    members = table.column_names
    path = tmp_path / "t.parquet"
    k = pa.array((np.arange(table.num_rows) * 7919) % 10)
    pq.write_table(table.append_column("k", k), path, **writer)  # type: ignore[arg-type]
    kw: dict[str, object] = {} if keep is None else {"filter": [("k", "<", keep)]}
    got = read_stack(path, members, stack_fill, num_threads=2, **kw)
    assert got.dtype == np.dtype(dtype)
    if keep is not None:
        table = table.filter(pc.less(k, keep))
    want = expected(table, members, dtype, fills(members, stack_fill))
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_tile_read_with_filter_and_members_in_any_order(tmp_path: Path):
    rng = np.random.default_rng(5)
    rows = 6000
    table = pa.table({f"c{j}": rng.standard_normal(rows).astype(np.float32) for j in range(18)})
    table = table.append_column("k", pa.array(np.arange(rows) % 5))
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=2500)
    members = [f"c{j}" for j in (17, 3, 0, 9, 16, 1, 2, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15)]
    want = expected(table, members, "float32", fills(members, False))
    np.testing.assert_array_equal(read_stack(path, members), want)
    kept = table.filter(pc.equal(table.column("k"), 2))
    filtered = read_stack(path, members, filter=[("k", "==", 2)])
    np.testing.assert_array_equal(
        filtered, expected(kept, members, "float32", fills(members, False))
    )
    # A transform of its own on one member: its group of 16 goes through Arrow, the
    # other group is still tiled, and the matrix holds both.
    clipped = table.set_column(
        3, "c3", pc.min_element_wise(pc.max_element_wise(table["c3"], -0.5), 0.5)
    )
    got = read_stack(path, members, transforms=[Clip("c3", min=-0.5, max=0.5)])
    np.testing.assert_array_equal(got, expected(clipped, members, "float32", fills(members, False)))


def test_a_column_with_fewer_values_than_its_footer_is_invalid_data(tmp_path: Path):
    """Row groups whose footer claims more rows than a stacked member's pages hold."""
    from . import thrift_footer as tf

    rows = 3000
    table = pa.table({f"c{j}": np.arange(rows, dtype=np.float32) + j for j in range(3)})
    path = tmp_path / "short.parquet"
    pq.write_table(table, path, row_group_size=rows, write_statistics=False)
    body, meta = tf.read_footer(path)
    group = tf.row_groups(meta)[0]
    tf.set_i64(group, tf.RG_NUM_ROWS, rows + 10)
    for chunk in group[tf.RG_COLUMNS][1][1]:
        cm = chunk[tf.CC_META][1]
        tf.set_i64(cm, tf.CM_NUM_VALUES, rows + 10)
    tf.set_i64(meta, tf.FILE_NUM_ROWS, rows + 10)
    tf.write_footer(path, body, meta)
    with pytest.raises(shardfeed.InvalidDataError, match=r"short\.parquet', row group 0.*'c0'"):
        read_stack(path, ["c0", "c1", "c2"])


@pytest.mark.parametrize("write_statistics", [True, False])
def test_a_null_without_a_fill_names_its_column_and_row(tmp_path: Path, write_statistics: bool):
    """Without statistics the tile read finds the null itself, then the generic read names it."""
    rows = 5000
    mask = np.arange(rows) == 3000
    table = pa.table(
        {"c0": np.ones(rows, np.float32), "c1": pa.array(np.ones(rows, np.float32), mask=mask)}
    )
    path = tmp_path / "nulls.parquet"
    pq.write_table(table, path, write_statistics=write_statistics)
    ld = shardfeed.Loader(
        path, batch_size=500, shuffle=False, columns=[], stack={"s": ["c0", "c1"]}
    )
    with pytest.raises(shardfeed.InvalidDataError, match=r"column 'c1'.*null value at row 3000"):
        for _ in ld:
            pass


def test_stats_count_the_stack_columns_each_read_decoded(tmp_path: Path):
    """The fast path is observable: every member of a plain stack is tile-read; a member
    with a transform of its own sends its group of 16 through Arrow; a filter does not."""
    from shardfeed.transforms import Log1p

    rows, width = 5000, 18
    rng = np.random.default_rng(3)
    table = pa.table({f"c{j}": rng.random(rows).astype(np.float32) for j in range(width)})
    table = table.append_column("k", pa.array(np.arange(rows) % 5))
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=2000)  # 3 row groups
    members = [f"c{j}" for j in range(width)]

    def counts(**kw: object) -> tuple[int, int]:
        ld = shardfeed.Loader(path, batch_size=500, columns=[], stack={"s": members}, **kw)
        for _ in ld:
            pass
        s = ld.stats()
        return s["stack_columns_tiled"], s["stack_columns_generic"]

    assert counts() == (3 * width, 0)
    assert counts(transforms=[Log1p("c5")]) == (3 * 2, 3 * 16)  # c16, c17 still tiled
    assert counts(filter=[("k", "==", 1)]) == (3 * width, 0)  # tiles keep the passing rows


def test_workers_waiting_for_a_row_group_take_parts_of_its_decode(tmp_path: Path):
    """Row groups large against the limit (a window of one, no decoding ahead): the
    workers that need the row group being decoded take its tile reads, 16 columns each
    (``decode_parts_shared``), instead of waiting while one core works.  The stream is
    the one of a single thread, null fills and a member through Arrow included."""
    from shardfeed.transforms import Log1p

    from .conftest import digest

    rows, width = 6000, 80
    rng = np.random.default_rng(8)
    cols = {f"c{j:02d}": rng.random(rows).astype(np.float32) for j in range(width)}
    table = pa.table(cols)
    holes = pa.array(rng.random(rows).astype(np.float32), mask=rng.random(rows) < 0.1)
    table = table.set_column(3, "c03", holes)
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path, row_group_size=3000)
    members = [f"c{j:02d}" for j in range(width)]

    def loader(threads: int) -> shardfeed.Loader:
        ld = shardfeed.Loader(
            path, batch_size=250, columns=[], stack={"s": members}, num_threads=threads,
            memory_limit="1536KiB", fill_null=-1.0, transforms=[Log1p("c70")],
            with_sample_id=True, output="numpy", seed=5,
        )  # fmt: skip
        return ld

    shared = loader(2)
    # Each part sleeps 30 ms (a test hook): the second worker, waiting for the row
    # group, gets some of the 4 tiled groups (the fifth, with c70, goes through Arrow).
    shared._settings.extra.update(debug_slow_stage="tile", debug_slow_us=30_000)
    got = digest(shared)
    s = shared.stats()
    assert s["decode_parts_shared"] > 0, s
    assert (s["stack_columns_tiled"], s["stack_columns_generic"]) == (2 * 64, 2 * 16)
    assert got == digest(loader(1))
    ids = np.concatenate([b["sample_id"] for b in loader(2)])
    assert np.array_equal(np.sort(ids), np.arange(rows))
