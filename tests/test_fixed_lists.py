"""Fixed-size lists inside lists (polars' multi-dimensional arrays, Hugging Face's
nested Sequence, pyarrow's nested fixed-size lists): one list of their values, in
order, a null inner list's values null, checked against pyarrow's own values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import HashBucket

from .conftest import digest
from .test_structs import loader_rows as rows

FILL = -7.0


def values_of(value: Any, shape: tuple[int, ...]) -> list[Any]:
    """One row's values in order: a null list at any level is its values, null."""
    if not shape:
        return [value]
    if value is None:
        return [None] * math.prod(shape)
    return [v for item in value for v in values_of(item, shape[1:])]


def fixed_type(shape: tuple[int, ...], outer: str) -> pa.DataType:
    t: pa.DataType = pa.float32()
    for size in reversed(shape):
        t = pa.list_(t, size)
    if outer == "list":
        return pa.list_(t)
    return pa.large_list(t) if outer == "large_list" else t


def nested(draw: Any, shape: tuple[int, ...]) -> Any:
    if not shape:
        return draw(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False, width=32)))
    if draw(st.integers(0, 5)) == 0:
        return None
    return [nested(draw, shape[1:]) for _ in range(shape[0])]


@st.composite
def columns(draw: Any) -> tuple[pa.DataType, list[Any], tuple[int, ...], str]:
    outer = draw(st.sampled_from(["fixed", "list", "large_list"]))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=2 if outer == "fixed" else 1,
                                max_size=3)))  # fmt: skip
    n = draw(st.integers(1, 40))
    if outer == "fixed":
        data = [nested(draw, shape) for _ in range(n)]
    else:
        data = [
            None
            if draw(st.integers(0, 6)) == 0
            else [nested(draw, shape) for _ in range(draw(st.integers(0, 3)))]
            for _ in range(n)
        ]
    return fixed_type(shape, outer), data, shape, outer


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(column=columns(), row_group=st.integers(1, 16))
def test_nested_fixed_size_lists_are_their_values_in_order(
    tmp_path_factory: Any, column: tuple[pa.DataType, list[Any], tuple[int, ...], str],
    row_group: int,
):  # fmt: skip
    type_, data, shape, outer = column
    root = tmp_path_factory.mktemp("fixed")
    pq.write_table(pa.table({"v": pa.array(data, type_)}), root / "f.parquet",
                   row_group_size=row_group)  # fmt: skip
    got = rows(root, ["v"], fill_null=FILL)
    width = math.prod(shape)
    if outer == "fixed":
        want = np.array(
            [[FILL if v is None else v for v in values_of(r, shape)] for r in data], np.float32
        ).reshape(len(data), *shape)
        assert got["v"].shape == (len(data), *shape)  # the arrays, not their values in a row
        np.testing.assert_array_equal(got["v"], want)
        return
    # A list of k fixed-size lists is a list of k * width values.
    lengths = [0 if r is None else len(r) * width for r in data]
    np.testing.assert_array_equal(got["v_lengths"], lengths)
    for i, r in enumerate(data):
        values = [] if r is None else [v for item in r for v in values_of(item, shape)]
        want_row = np.array([FILL if v is None else v for v in values], np.float32)
        np.testing.assert_array_equal(got["v"][i, : lengths[i]], want_row)
        assert not got["v"][i, lengths[i] :].any()  # padding


def test_polars_arrays_read_as_their_values_row_major(tmp_path: Path):
    """polars' Array of a 2-D shape is a nested fixed-size list: a batch is
    [batch, 2, 3], the arrays as numpy holds them."""
    data = np.random.default_rng(0).random((500, 2, 3), dtype=np.float32)
    pl.DataFrame({"a": pl.Series(data, dtype=pl.Array(pl.Float32, (2, 3))),
                  "y": np.arange(500)}).write_parquet(tmp_path / "p.parquet",
                                                      row_group_size=128)  # fmt: skip
    got = rows(tmp_path / "p.parquet", ["a", "y"])
    assert got["a"].shape == (500, 2, 3)
    np.testing.assert_array_equal(got["a"], data)


def test_the_stream_is_the_same_for_threads_and_the_decoded_tier(tmp_path: Path):
    data = np.random.default_rng(1).random((2_000, 4, 2), dtype=np.float32)
    pl.DataFrame({"a": pl.Series(data, dtype=pl.Array(pl.Float32, (4, 2)))}).write_parquet(
        tmp_path / "p.parquet", row_group_size=300
    )
    kw: dict[str, Any] = dict(batch_size=64, seed=3, with_sample_id=True)
    base = digest(shardfeed.Loader(tmp_path, num_threads=1, **kw))
    assert digest(shardfeed.Loader(tmp_path, num_threads=3, **kw)) == base
    for _ in range(2):  # the decoded tier, cold and warm
        ld = shardfeed.Loader(tmp_path, cache_dir=tmp_path / "c", cache_decoded=True, **kw)
        assert digest(ld) == base
    # Through DataLoader workers' shared memory, [batch, 4, 2] as it is.
    ds = shardfeed.TorchDataset(tmp_path, **kw)
    batches = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=60))
    assert batches[0]["a"].shape == (64, 4, 2) and digest(batches) == base
    with shardfeed.Loader(tmp_path, batch_size=64) as ld:
        (info,) = ld.describe_outputs()
    assert info["shape"] == [4, 2] and info["dtype"] == "float32"


def test_nested_fixed_size_lists_of_strings_hash_and_list_their_values(tmp_path: Path):
    tags = [[["a", "b"], ["c", None]], None, [["b", "b"], None]]
    t = pa.list_(pa.list_(pa.string(), 2), 2)
    pq.write_table(pa.table({"t": pa.array(tags, t)}), tmp_path / "s.parquet")
    flat = pa.table({"t": pa.array([["a", "b", "c", None], None, ["b", "b", None, None]],
                                   pa.list_(pa.string(), 4))})  # fmt: skip
    pq.write_table(flat, tmp_path / "flat.parquet")
    hb = [HashBucket("t", 1_000)]
    got = rows(tmp_path / "s.parquet", ["t"], transforms=hb, fill_null=0)
    want = rows(tmp_path / "flat.parquet", ["t"], transforms=hb, fill_null=0)
    assert got["t"].shape == (3, 2, 2)
    np.testing.assert_array_equal(got["t"].reshape(3, 4), want["t"])
    assert shardfeed.vocabulary(tmp_path / "s.parquet", "t") == ["b", "a", "c"]


def test_in_structs_lists_of_structs_and_lists_of_tensors(tmp_path: Path):
    """A struct field, a list of structs' field and a list of fixed_shape_tensors
    collapse as a top-level column does; a null struct nulls its field's values."""
    fsl = pa.list_(pa.list_(pa.float32(), 2), 2)
    s = pa.struct([("a", fsl), ("b", pa.int32())])
    structs = [{"a": [[1, 2], [3, 4]], "b": 1}, None, {"a": [None, [5, 6]], "b": 2}]
    items = [[{"a": [[1, 2], [3, 4]], "b": 1}, {"a": [[9, 9], None], "b": 5}], None, [None]]
    tensor = pa.fixed_shape_tensor(pa.float32(), [2, 2])
    storage = pa.array([[[1, 2, 3, 4]], None, [[5, 6, 7, 8], [9, 10, 11, 12]]],
                       pa.list_(tensor.storage_type))  # fmt: skip
    tensors = pa.ListArray.from_arrays(
        storage.offsets, pa.ExtensionArray.from_storage(tensor, storage.values),
        mask=storage.is_null(),
    )  # fmt: skip
    table = pa.table({"s": pa.array(structs, s), "items": pa.array(items, pa.list_(s)),
                      "t": tensors})  # fmt: skip
    pq.write_table(table, tmp_path / "x.parquet")
    got = rows(tmp_path, ["s.a", "items.a", "t"], fill_null=-1)
    np.testing.assert_array_equal(
        got["s.a"].reshape(3, 4), [[1, 2, 3, 4], [-1] * 4, [-1, -1, 5, 6]]
    )
    assert got["s.a"].shape == (3, 2, 2)
    np.testing.assert_array_equal(got["items.a_lengths"], [8, 0, 4])
    np.testing.assert_array_equal(got["items.a"][0], [1, 2, 3, 4, 9, 9, -1, -1])
    np.testing.assert_array_equal(got["items.a"][2, :4], [-1] * 4)
    np.testing.assert_array_equal(got["t_lengths"], [4, 0, 8])
    np.testing.assert_array_equal(got["t"][2], np.arange(5, 13))


def test_files_with_arrays_of_other_shapes_conflict_where_the_column_is_used(tmp_path: Path):
    """Six values as 2 x 3 in one file and 3 x 2 in another would read as one
    row-major order, wrong for one of them: using the column names both files."""
    values = np.arange(60, dtype=np.float32).reshape(10, 6)
    for name, shape in (("a.parquet", (2, 3)), ("b.parquet", (3, 2))):
        pl.DataFrame({"g": pl.Series(values.reshape(10, *shape), dtype=pl.Array(pl.Float32, shape)),
                      "y": np.arange(10)}).write_parquet(tmp_path / name)  # fmt: skip
    with pytest.raises(shardfeed.SchemaMismatchError, match=r"shape \[2, 3\] in file 'a.parquet'"
                       r" and \[3, 2\] in file 'b.parquet'"):  # fmt: skip
        rows(tmp_path, ["g"])
    np.testing.assert_array_equal(rows(tmp_path, ["y"])["y"], list(range(10)) * 2)
    # A plain fixed-size list of six beside the 2 x 3 arrays: its rows as 2 x 3 too.
    (tmp_path / "b.parquet").unlink()
    pq.write_table(pa.table({"g": pa.array(values.tolist(), pa.list_(pa.float32(), 6))}),
                   tmp_path / "c.parquet")  # fmt: skip
    got = rows(tmp_path, ["g"])["g"]
    np.testing.assert_array_equal(got, np.vstack([values, values]).reshape(20, 2, 3))
