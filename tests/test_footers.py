"""Footers that lie (issue 10): every count, offset and size is checked against the file.

Each case writes a valid file with pyarrow, rewrites one footer field, and expects an
InvalidDataError that names the file (and the row group), never a crash or a wrong row count.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed

from . import thrift_footer as tf
from .conftest import make_table

Patch = Callable[[tf.Struct], None]


def patched(tmp_path: Path, patch: Patch, name: str = "lie.parquet") -> Path:
    path = tmp_path / name
    pq.write_table(make_table(0, 600, 0), path, row_group_size=200)
    body, meta = tf.read_footer(path)
    patch(meta)
    tf.write_footer(path, body, meta)
    return path


def rg_rows(rg: int, rows: int) -> Patch:
    return lambda meta: tf.set_i64(tf.row_groups(meta)[rg], tf.RG_NUM_ROWS, rows)


def chunk_field(rg: int, column: int, field: int, value: int) -> Patch:
    return lambda meta: tf.set_i64(tf.column_meta(tf.row_groups(meta)[rg], column), field, value)


def consistent_rows(rg: int, rows: int) -> Patch:
    """Row count, every chunk's num_values and the file total raised together."""

    def patch(meta: tf.Struct) -> None:
        group = tf.row_groups(meta)[rg]
        old = group[tf.RG_NUM_ROWS][1]
        tf.set_i64(group, tf.RG_NUM_ROWS, rows)
        for chunk in group[tf.RG_COLUMNS][1][1]:
            cm = chunk[tf.CC_META][1]
            tf.set_i64(cm, tf.CM_NUM_VALUES, cm[tf.CM_NUM_VALUES][1] - old + rows)
        tf.set_i64(meta, tf.FILE_NUM_ROWS, meta[tf.FILE_NUM_ROWS][1] - old + rows)

    return patch


def read_all(path: Path) -> int:
    ld = shardfeed.Loader(path, batch_size=50, output="numpy", num_threads=2, drop_last=False)
    return sum(len(b["id"]) for b in ld)


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        (rg_rows(1, 4294967295), r"row group 1: num_rows 4294967295 is outside"),
        (rg_rows(1, 2**31 - 1), r"row group 1, column 'id': num_values 200 does not fit"),
        (rg_rows(1, 2**40), r"row group 1: num_rows 1099511627776 is outside"),
        (rg_rows(0, -1), r"row group 0: num_rows -1 is outside"),
        (rg_rows(2, -144115188075855856), r"row group 2: num_rows -144115188075855856"),
        (rg_rows(0, 199), r"row group 0, column 'id': num_values 200 does not fit"),
        (lambda m: tf.set_i64(m, tf.FILE_NUM_ROWS, 0), r"num_rows 0 differs from the 600 rows"),
        (lambda m: tf.set_i64(m, tf.FILE_NUM_ROWS, 601), r"num_rows 601 differs"),
        (lambda m: tf.set_i64(m, tf.FILE_NUM_ROWS, -(2**62)), r"differs from the 600 rows"),
        (consistent_rows(1, 2**31), r"row group 1: num_rows 2147483648 is outside"),
        (consistent_rows(0, -5), r"row group 0: num_rows -5 is outside"),
        (chunk_field(1, 0, tf.CM_NUM_VALUES, 2**62), r"row group 1, column 'id': num_values"),
        (chunk_field(1, 0, tf.CM_DATA_PAGE_OFFSET, 2**62), r"row group 1, column 'id': data_page"),
        (chunk_field(1, 0, tf.CM_DATA_PAGE_OFFSET, -4), r"row group 1, column 'id': data_page"),
        (chunk_field(2, 1, tf.CM_TOTAL_COMPRESSED, 2**63 - 1), r"row group 2, column 'x': total_c"),
        (chunk_field(2, 1, tf.CM_TOTAL_COMPRESSED, -1), r"row group 2, column 'x': total_comp"),
        (chunk_field(0, 2, tf.CM_DICT_PAGE_OFFSET, 2**40), r"row group 0, column 'f0': dictionary"),
        (
            lambda m: tf.set_i64(tf.row_groups(m)[1], tf.RG_TOTAL_COMPRESSED, 2**50),
            r"row group 1: total_compressed_size",
        ),
    ],
)
def test_lying_footer_is_invalid_data(tmp_path, patch, match):
    path = patched(tmp_path, patch)
    with pytest.raises(shardfeed.InvalidDataError, match=r"lie\.parquet'.*" + match):
        read_all(path)


def test_missing_column_chunk_is_invalid_data(tmp_path):
    def drop_chunk(meta: tf.Struct) -> None:
        columns = tf.row_groups(meta)[1][tf.RG_COLUMNS][1][1]
        del columns[-1]

    path = patched(tmp_path, drop_chunk)
    with pytest.raises(shardfeed.InvalidDataError, match=r"lie\.parquet', row group 1: \d+ column"):
        read_all(path)


def test_lie_in_one_file_names_that_file(tmp_path):
    pq.write_table(make_table(600, 100, 1), tmp_path / "a.parquet")
    patched(tmp_path, rg_rows(2, 4294967295), name="b.parquet")
    with pytest.raises(shardfeed.InvalidDataError, match=r"b\.parquet', row group 2"):
        shardfeed.Loader(tmp_path)


def test_valid_footers_of_every_shape_pass(tmp_path):
    """Nulls, lists (empty and null), dictionary and plain, page v2, zero-row files: all read."""
    t = pa.table(
        {
            "id": pa.array(range(300), pa.int64()),
            "opt": pa.array([None if i % 7 == 0 else float(i) for i in range(300)]),
            "seq": pa.array([None if i % 5 == 0 else [i] * (i % 3) for i in range(300)]),
            "s": pa.array([str(i % 4) for i in range(300)]),
        }
    )
    pq.write_table(t, tmp_path / "a.parquet", row_group_size=64, data_page_version="2.0")
    pq.write_table(t, tmp_path / "b.parquet", row_group_size=100, use_dictionary=False)
    pq.write_table(t.slice(0, 0), tmp_path / "c.parquet")
    ld = shardfeed.Loader(
        tmp_path, columns=["id", "opt"], batch_size=60, output="numpy", fill_null=0
    )
    assert ld.num_rows == 600
    assert sum(len(b["id"]) for b in ld) == 600


def test_consistent_lie_beyond_the_bytes_is_implausible(tmp_path):
    path = patched(tmp_path, consistent_rows(1, 2**31 - 1))
    with pytest.raises(shardfeed.InvalidDataError, match=r"lie\.parquet', row group 1: .*implaus"):
        read_all(path)


def test_consistent_lie_is_caught_when_decoding_with_bounded_memory(tmp_path):
    """Within the plausible bound the pages tell: read in pieces, not one 800 MB batch."""
    path = patched(tmp_path, consistent_rows(1, 10**8))
    ld = shardfeed.Loader(path, batch_size=50, output="numpy", num_threads=2, shuffle=False)
    with pytest.raises(shardfeed.InvalidDataError, match=r"row group 1: decoded 200 rows"):
        for _ in ld:
            pass
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 << 20  # KiB: < 2 GiB


def test_a_dictionary_page_that_claims_a_billion_values_fails_cleanly(tmp_path):
    """Found by decode_fuzz: a dictionary page header whose value count makes Arrow reserve
    9.6 GB before it finds the page short.  The reservation is never touched; the read fails
    with an InvalidDataError naming the file, and resident memory stays small."""
    found = Path(__file__).parents[1] / "cpp/fuzz/regressions/decode_fuzz"
    path = tmp_path / "d.parquet"
    path.write_bytes((found / "dictionary_page_of_1.2e9_values").read_bytes())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(shardfeed.InvalidDataError, match=r"d\.parquet.*row group"):
        loader = shardfeed.Loader(path, batch_size=4, output="numpy", drop_last=False)
        for _ in loader:
            pass
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 1024, grown_mb
