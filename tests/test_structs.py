"""Struct columns: each field of a struct (``user.age``) is a column of its own,
null where the struct is, checked against pyarrow's own flattening."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import HashBucket, Vocabulary

from .conftest import digest

INNER = pa.struct([("c", pa.float64()), ("d", pa.list_(pa.float32()))])
OUTER = pa.struct([("a", pa.int32()), ("b", INNER), ("e", pa.string())])
FILL = -7.0

FLOATS = st.floats(-1e6, 1e6, allow_nan=False, width=32)
INNERS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "c": st.one_of(st.none(), st.floats(-1e9, 1e9, allow_nan=False)),
            "d": st.one_of(st.none(), st.lists(st.one_of(st.none(), FLOATS), max_size=4)),
        }
    ),
)
ROWS = st.lists(
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "a": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                "b": INNERS,
                "e": st.one_of(st.none(), st.sampled_from(["x", "y", "zz", ""])),
            }
        ),
    ),
    min_size=1,
    max_size=50,
)


def _examples(n: int) -> Any:
    """Hypothesis settings for a test that takes tmp_path (one folder for all its examples)."""
    return settings(
        max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )


def flattened(table: pa.Table) -> pa.Table:
    """pyarrow's flattening, to the leaves: a struct's nulls are its fields' nulls."""
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    return table


def loader_rows(source: Any, columns: list[str], **kw: Any) -> dict[str, np.ndarray]:
    kw.setdefault("fill_null", FILL)
    with shardfeed.Loader(
        source,
        batch_size=10_000,
        shuffle=False,
        drop_last=False,
        output="numpy",
        columns=columns,
        **kw,
    ) as ld:
        batches = list(ld)
    assert len(batches) == 1
    return batches[0]


def filled(column: pa.ChunkedArray, fill: float = FILL) -> np.ndarray:
    return column.fill_null(pa.scalar(fill).cast(column.type)).to_numpy()


def padded(column: pa.ChunkedArray, fill: float = FILL) -> tuple[np.ndarray, np.ndarray]:
    rows = [[fill if v is None else v for v in (r or [])] for r in column.to_pylist()]
    longest = max((len(r) for r in rows), default=0)
    out = np.zeros((len(rows), longest), np.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out, np.array([len(r) for r in rows])


@_examples(40)
@given(rows=ROWS, rg=st.integers(1, 20), threads=st.sampled_from([1, 3]))
def test_struct_fields_are_what_pyarrow_flattens(tmp_path: Path, rows: list, rg: int, threads: int):
    table = pa.table({"top": pa.array(range(len(rows)), pa.int64()), "s": pa.array(rows, OUTER)})
    path = tmp_path / f"t{rg}-{threads}-{len(rows)}.parquet"
    pq.write_table(table, path, row_group_size=rg)
    ref = flattened(table)
    assert ref.column_names == ["top", "s.a", "s.b.c", "s.b.d", "s.e"]
    got = loader_rows(
        path,
        ["top", "s.a", "s.b.c", "s.b.d", "s.e"],
        transforms=[HashBucket("s.e", 1_000)],
        num_threads=threads,
    )
    np.testing.assert_array_equal(got["top"], np.arange(len(rows)))
    np.testing.assert_array_equal(got["s.a"], filled(ref.column("s.a")))
    assert got["s.a"].dtype == np.int32
    np.testing.assert_array_equal(got["s.b.c"], filled(ref.column("s.b.c")))
    values, lengths = padded(ref.column("s.b.d"))
    np.testing.assert_array_equal(got["s.b.d_lengths"], lengths)
    np.testing.assert_array_equal(got["s.b.d"][:, : values.shape[1]], values)
    # A null string (or a null struct above it) is HashBucket's fill, as in a plain column.
    plain = tmp_path / f"plain{rg}-{threads}-{len(rows)}.parquet"
    pq.write_table(pa.table({"e": ref.column("s.e")}), plain)
    np.testing.assert_array_equal(
        got["s.e"], loader_rows(plain, ["e"], transforms=[HashBucket("e", 1_000)])["e"]
    )


def nested_table(n: int, seed: int, parent_nulls: bool) -> pa.Table:
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < 0.2 if parent_nulls else None
    inner = pa.StructArray.from_arrays(
        [pa.array(rng.random(n, dtype=np.float32)), pa.array(rng.random(n, dtype=np.float32))],
        names=["p", "q"],
    )
    outer = pa.StructArray.from_arrays(
        [pa.array(rng.random(n, dtype=np.float32)), inner],
        fields=[
            pa.field("r", pa.float32(), nullable=False),
            pa.field("in", inner.type, nullable=False),
        ],
        mask=pa.array(mask) if mask is not None else None,
    )
    f = pa.array(rng.random(n, dtype=np.float32))
    fields = [pa.field("f", pa.float32()), pa.field("s", outer.type, nullable=parent_nulls)]
    return pa.Table.from_arrays([f, outer], schema=pa.schema(fields))


@pytest.mark.parametrize("parent_nulls", [False, True])
def test_a_stack_of_struct_fields_is_the_flattened_columns(tmp_path: Path, parent_nulls: bool):
    """Required structs (one definition level) and nullable ones (nulls from
    the struct above): the stack's rows are the flattened columns'."""
    table = nested_table(5_000, 1, parent_nulls)
    pq.write_table(table, tmp_path / "n.parquet", row_group_size=1_500)
    members = ["s.in.q", "f", "s.r", "s.in.p"]
    got = loader_rows(tmp_path / "n.parquet", [], stack={"v": members})
    ref = flattened(table)
    expected = np.stack([filled(ref.column(m)) for m in members], axis=1)
    np.testing.assert_array_equal(got["v"], expected)
    assert got["v"].dtype == np.float32
    if parent_nulls:
        assert (got["v"][:, 0] == FILL).sum() == pc.sum(pc.is_null(table.column("s"))).as_py()
        with pytest.raises(shardfeed.InvalidDataError, match=r"s\.r"):
            loader_rows(tmp_path / "n.parquet", ["s.r"], fill_null=None)


def test_struct_fields_evolve_across_files_as_columns_do(tmp_path: Path):
    """A field added to a struct later, a widened field, a file without the
    struct: matched by path, promoted, missing fields null."""
    pq.write_table(
        pa.table({"s": pa.array([{"a": 1}, {"a": 2}], pa.struct([("a", pa.int32())]))}),
        tmp_path / "0.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "s": pa.array(
                    [{"a": 3, "z": 0.5}, None],
                    pa.struct([("a", pa.int64()), ("z", pa.float64())]),
                )
            }
        ),
        tmp_path / "1.parquet",
    )
    pq.write_table(pa.table({"other": [9]}), tmp_path / "2.parquet")
    got = loader_rows(tmp_path, ["s.a", "s.z"])
    np.testing.assert_array_equal(got["s.a"], [1, 2, 3, FILL, FILL])
    assert got["s.a"].dtype == np.int64
    np.testing.assert_array_equal(got["s.z"], [FILL, FILL, 0.5, FILL, FILL])
    pq.write_table(
        pa.table({"s": pa.array([{"a": "x"}], pa.struct([("a", pa.string())]))}),
        tmp_path / "3.parquet",
    )
    with pytest.raises(shardfeed.SchemaMismatchError, match=r"s\.a"):
        loader_rows(tmp_path, ["s.a"])
    np.testing.assert_array_equal(loader_rows(tmp_path, ["s.z"])["s.z"][2], 0.5)


def test_filters_on_struct_fields_prune_and_keep_the_rows_pyarrow_keeps(tmp_path: Path):
    n = 4_000
    a = np.arange(n, dtype=np.int64)
    s = pa.StructArray.from_arrays(
        [pa.array(a), pa.array(a * 0.5)],
        names=["a", "b"],
        mask=pa.array(a % 7 == 0),
    )
    table = pa.table({"id": a, "s": s})
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=500)
    flt = [("s.a", ">=", 1_000), ("s.b", "<", 1_500.0)]
    with shardfeed.Loader(
        tmp_path / "f.parquet",
        batch_size=100_000,
        shuffle=False,
        drop_last=False,
        output="numpy",
        columns=["id"],
        filter=flt,
    ) as ld:
        got = np.concatenate([b["id"] for b in ld])
        stats = ld.stats()
    ref = flattened(table).filter((pc.field("s.a") >= 1_000) & (pc.field("s.b") < 1_500.0))
    np.testing.assert_array_equal(got, ref.column("id").to_numpy())
    assert stats["row_groups_decoded"] <= 5  # the statistics of s.a pruned the others


def test_the_stream_over_structs_is_one_for_threads_workers_and_the_decoded_tier(
    tmp_path: Path,
):
    data = tmp_path / "d"
    data.mkdir()
    for i in range(3):
        pq.write_table(nested_table(3_000, i, True), data / f"{i}.parquet", row_group_size=700)
    kw: dict[str, Any] = dict(
        batch_size=256, seed=3, fill_null=0.0, stack={"v": ["s.r", "s.in.p"]}, columns=["s.in.q"]
    )
    base = digest(shardfeed.Loader(data, num_threads=1, **kw))
    assert digest(shardfeed.Loader(data, num_threads=3, **kw)) == base
    cache = tmp_path / "cache"
    for _ in range(2):  # cold, then warm
        ld = shardfeed.Loader(data, num_threads=2, cache_dir=cache, cache_decoded=True, **kw)
        assert digest(ld) == base
    assert ld.stats()["decoded_hits"] > 0
    torch = pytest.importorskip("torch")
    ds = shardfeed.TorchDataset(data, **kw)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert digest(dl) == base


def test_categorical_strings_in_structs(tmp_path: Path):
    users = pa.array(
        [{"country": c, "age": i} for i, c in enumerate(["us", "de", None, "us", "fr"])] + [None],
        pa.struct([("country", pa.string()), ("age", pa.int32())]),
    )
    pq.write_table(pa.table({"user": users}), tmp_path / "u.parquet")
    assert shardfeed.vocabulary(tmp_path, "user.country") == ["us", "de", "fr"]
    got = loader_rows(
        tmp_path,
        ["user.country"],
        transforms=[Vocabulary("user.country", ["us", "de", "fr"])],
    )
    np.testing.assert_array_equal(got["user.country"], [1, 2, 0, 1, 3, 0])


def test_a_column_named_as_a_struct_field_is_named_in_the_error(tmp_path: Path):
    table = pa.table(
        {
            "s.a": [1, 2],
            "s": pa.array([{"a": 3}, {"a": 4}], pa.struct([("a", pa.int64())])),
            "ok": [5, 6],
        }
    )
    pq.write_table(table, tmp_path / "c.parquet")
    # Which is which is said, in the file's order (once: the two were not told apart).
    with pytest.raises(
        shardfeed.SchemaMismatchError,
        match=r"more than one column named 's\.a': a column of its own and the field 'a' of "
        r"the struct 's'",
    ):
        loader_rows(tmp_path, ["s.a"])
    np.testing.assert_array_equal(loader_rows(tmp_path, ["ok"])["ok"], [5, 6])


def test_fields_the_loader_cannot_hand_out_are_named_by_their_path(tmp_path: Path):
    ll = pa.list_(pa.list_(pa.int64()))
    table = pa.table(
        {"s": pa.array([{"ll": [[1]], "x": 1.0}], pa.struct([("ll", ll), ("x", pa.float64())]))}
    )
    pq.write_table(table, tmp_path / "m.parquet")
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'s\.ll'.*nested lists"):
        loader_rows(tmp_path, None)
    np.testing.assert_array_equal(loader_rows(tmp_path, ["s.x"])["s.x"], [1.0])
    # The struct by its own name: its fields are named.
    with pytest.raises(shardfeed.ColumnNotFoundError, match=r"'s' is a struct.*'s\.ll', 's\.x'"):
        loader_rows(tmp_path, ["s"])


MAPS = st.lists(
    st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["ctr", "views", "é", ""]),
            st.one_of(st.none(), FLOATS),
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=40,
)


@_examples(30)
@given(rows=MAPS, rg=st.integers(1, 15))
def test_a_map_is_its_keys_and_its_values(tmp_path: Path, rows: list, rg: int):
    """Sparse features as map<string, float>: m.key (hashed) and m.value, aligned,
    as Spark's map_keys and map_values give them."""
    pairs = [None if r is None else list(r.items()) for r in rows]
    path = tmp_path / f"m{rg}-{len(rows)}.parquet"
    pq.write_table(
        pa.table({"m": pa.array(pairs, pa.map_(pa.string(), pa.float32()))}),
        path,
        row_group_size=rg,
    )
    got = loader_rows(path, ["m.key", "m.value"], transforms=[HashBucket("m.key", 1_000)])
    keys = [None if r is None else list(r) for r in rows]
    plain = tmp_path / f"k{rg}-{len(rows)}.parquet"
    pq.write_table(pa.table({"k": pa.array(keys, pa.list_(pa.string()))}), plain)
    want = loader_rows(plain, ["k"], transforms=[HashBucket("k", 1_000)])
    np.testing.assert_array_equal(got["m.key"], want["k"])
    np.testing.assert_array_equal(got["m.key_lengths"], want["k_lengths"])
    np.testing.assert_array_equal(got["m.value_lengths"], want["k_lengths"])
    for i, r in enumerate(rows):
        values = [FILL if v is None else v for v in (r or {}).values()]
        np.testing.assert_array_equal(got["m.value"][i, : len(values)], np.float32(values))


ITEM = pa.struct([("id", pa.int64()), ("price", pa.float32()), ("tag", pa.string())])
ITEMS = st.lists(
    st.one_of(
        st.none(),
        st.lists(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "id": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
                        "price": st.one_of(st.none(), FLOATS),
                        "tag": st.one_of(st.none(), st.sampled_from(["a", "b", "ü"])),
                    }
                ),
            ),
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=40,
)


@_examples(40)
@given(rows=ITEMS, rg=st.integers(1, 15), large=st.booleans())
def test_a_list_of_structs_is_a_list_per_field(tmp_path: Path, rows: list, rg: int, large: bool):
    """items: list<struct<id, price, tag>> gives items.id, items.price, items.tag,
    each a list with the rows' lengths; a null element's fields are null."""
    list_type = pa.large_list(ITEM) if large else pa.list_(ITEM)
    path = tmp_path / f"i{rg}-{large}-{len(rows)}.parquet"
    pq.write_table(pa.table({"items": pa.array(rows, list_type)}), path, row_group_size=rg)
    got = loader_rows(
        path, ["items.id", "items.price", "items.tag"], transforms=[HashBucket("items.tag", 97)]
    )

    def field(name: str) -> list[list[Any]]:
        return [[None if e is None else e[name] for e in (r or [])] for r in rows]

    lengths = np.array([len(r or []) for r in rows])
    longest = int(lengths.max())
    for name, dtype in [("id", np.int64), ("price", np.float32)]:
        expected = np.zeros((len(rows), longest), dtype)
        for i, r in enumerate(field(name)):
            expected[i, : len(r)] = [FILL if v is None else v for v in r]
        np.testing.assert_array_equal(got[f"items.{name}_lengths"], lengths)
        np.testing.assert_array_equal(got[f"items.{name}"][:, :longest], expected)
        assert got[f"items.{name}"].dtype == dtype
    # Its strings hash as a list<string> column of the same values does.
    plain = tmp_path / f"tags{rg}-{large}-{len(rows)}.parquet"
    tags = [None if r is None else t for r, t in zip(rows, field("tag"), strict=True)]
    pq.write_table(pa.table({"t": pa.array(tags, pa.list_(pa.string()))}), plain)
    want = loader_rows(plain, ["t"], transforms=[HashBucket("t", 97)])
    np.testing.assert_array_equal(got["items.tag"], want["t"])
    np.testing.assert_array_equal(got["items.tag_lengths"], want["t_lengths"])


def test_structs_in_map_values_and_lists_of_structs_in_structs(tmp_path: Path):
    """The rules compose: m.value.x for a map of structs, s.items.x for a list of
    structs inside a struct; a null struct value, element or outer struct is null."""
    value = pa.struct([("x", pa.int64()), ("y", pa.float64())])
    maps = [[("a", {"x": 1, "y": 0.5})], [], None, [("b", None), ("c", {"x": 3, "y": None})]]
    inner = pa.list_(pa.struct([("x", pa.int64())]))
    outer = [{"items": [{"x": 5}, None]}, None, {"items": None}, {"items": [{"x": 6}]}]
    table = pa.table(
        {
            "m": pa.array(maps, pa.map_(pa.string(), value)),
            "s": pa.array(outer, pa.struct([("items", inner)])),
        }
    )
    pq.write_table(table, tmp_path / "c.parquet")
    got = loader_rows(tmp_path, ["m.value.x", "m.value.y", "s.items.x"])
    np.testing.assert_array_equal(got["m.value.x_lengths"], [1, 0, 0, 2])
    np.testing.assert_array_equal(got["m.value.x"], [[1, 0], [0, 0], [0, 0], [FILL, 3]])
    np.testing.assert_array_equal(got["m.value.y"][[0, 3]], [[0.5, 0], [FILL, FILL]])
    np.testing.assert_array_equal(got["s.items.x_lengths"], [2, 0, 0, 1])
    np.testing.assert_array_equal(got["s.items.x"], [[5, FILL], [0, 0], [0, 0], [6, 0]])


def test_a_name_that_is_a_struct_in_one_file_and_a_column_in_another(tmp_path: Path):
    """pyarrow refuses to read these as one column; before, they became two columns, each
    null in the other's files (and fill_null hid it), or one column of unrelated values."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(
        pa.table({"s": pa.array([{"a": 1}, {"a": 2}]), "x": [1, 2]}), mixed / "a.parquet"
    )
    pq.write_table(pa.table({"s": [7, 8], "x": [3, 4]}), mixed / "b.parquet")
    for columns in (None, ["s"], ["s.a"]):
        with pytest.raises(
            shardfeed.SchemaMismatchError, match=r"'s' is a struct in file 'a\.parquet'"
        ):
            shardfeed.Loader(mixed, batch_size=4, fill_null=0, columns=columns)
    with shardfeed.Loader(
        mixed, batch_size=4, shuffle=False, output="numpy", columns=["x"]
    ) as loader:
        assert next(iter(loader))["x"].tolist() == [1, 2, 3, 4]  # the other columns still read
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    pq.write_table(pa.table({"s": pa.array([{"a": 1}])}), dotted / "a.parquet")
    pq.write_table(pa.table({"s.a": [5]}), dotted / "b.parquet")
    with pytest.raises(shardfeed.SchemaMismatchError, match="the field 'a' of the struct 's'"):
        shardfeed.Loader(dotted, batch_size=4, columns=["s.a"])
    # An all-null 's' (pandas' None column) is no clash: its rows' fields are null.
    nulls = tmp_path / "nulls"
    nulls.mkdir()
    pq.write_table(pa.table({"s": pa.array([{"a": 1}, {"a": 2}])}), nulls / "a.parquet")
    pq.write_table(pa.table({"s": pa.nulls(2)}), nulls / "b.parquet")
    with shardfeed.Loader(nulls, batch_size=4, shuffle=False, output="numpy", columns=["s.a"],
                          fill_null=-1) as loader:  # fmt: skip
        assert next(iter(loader))["s.a"].tolist() == [1, 2, -1, -1]


POINT = pa.struct([("x", pa.float32()), ("id", pa.int64())])
POINTS = st.lists(
    st.one_of(
        st.none(),
        st.lists(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "x": st.one_of(st.none(), FLOATS),
                        "id": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
                    }
                ),
            ),
            min_size=3,
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=40,
)


@_examples(30)
@given(rows=POINTS, rg=st.integers(1, 15))
def test_a_fixed_size_list_of_structs_is_a_fixed_size_list_per_field(
    tmp_path: Path, rows: list, rg: int
):
    """p: fixed_size_list<struct<x, id>>[3] gives p.x and p.id, each [batch, 3]; a null
    list's or element's fields are null.  (Once: "its elements cannot become a tensor".)"""
    path = tmp_path / f"p{rg}-{len(rows)}.parquet"
    table = pa.table({"p": pa.array(rows, pa.list_(POINT, 3)), "n": pa.array(range(len(rows)))})
    pq.write_table(table, path, row_group_size=rg)
    got = loader_rows(path, ["p.x", "p.id", "n"])

    def value(e: Any, name: str) -> Any:
        return FILL if e is None or e[name] is None else e[name]

    for name, dtype in [("x", np.float32), ("id", np.int64)]:
        expected = np.array([[value(e, name) for e in (r or [None] * 3)] for r in rows], dtype)
        np.testing.assert_array_equal(got[f"p.{name}"], expected)
        assert got[f"p.{name}"].dtype == dtype
    # Shuffled, over threads and the decoded tier: one stream, each row its own values.
    kw: dict[str, Any] = dict(batch_size=4, shuffle=True, with_sample_id=True, drop_last=False,
                              columns=["p.x", "p.id"], fill_null=FILL, output="numpy")  # fmt: skip
    one = digest(shardfeed.Loader(path, num_threads=1, **kw))
    assert digest(shardfeed.Loader(path, num_threads=3, **kw)) == one
    for batch in shardfeed.Loader(path, num_threads=2, **kw):
        np.testing.assert_array_equal(batch["p.id"], got["p.id"][batch["sample_id"]])


@_examples(25)
@given(
    old=st.lists(
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=4)),
        min_size=1,
        max_size=12,
    ),
    large=st.booleans(),
    rg=st.integers(1, 5),
    ask_sibling=st.booleans(),
)
def test_a_field_added_to_a_lists_structs_is_nulls_as_long_as_the_list(
    tmp_path: Path, old: list, large: bool, rg: int, ask_sibling: bool
):
    """`ls.b` added to the elements of ls: list<struct<a>> in later files reads, in the
    earlier ones, as a list of nulls as long as the row's list (as pyarrow and Spark read
    it), not a null list: `ls.a` and `ls.b` stay aligned, asked together or not."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example
    wrap = pa.large_list if large else pa.list_
    a_rows = [None if r is None else [None if v is None else {"a": v} for v in r] for r in old]
    a_type = wrap(pa.struct([("a", pa.int64())]))
    ab_type = wrap(pa.struct([("a", pa.int64()), ("b", pa.float64())]))
    new = [[{"a": 7, "b": 1.5}, {"a": 8, "b": None}], None, []]
    pq.write_table(
        pa.table({"ls": pa.array(a_rows, a_type)}), folder / "a.parquet", row_group_size=rg
    )
    pq.write_table(pa.table({"ls": pa.array(new, ab_type)}), folder / "b.parquet")
    pq.write_table(pa.table({"other": [1, 2]}), folder / "c.parquet")  # no ls at all
    columns = ["ls.a", "ls.b"] if ask_sibling else ["ls.b"]
    got = loader_rows(folder, columns)
    whole = pa.concat_tables(
        [pq.read_table(folder / f, schema=pa.schema([("ls", ab_type)])) for f in ("a.parquet",
         "b.parquet")] + [pa.table({"ls": pa.nulls(2, ab_type)})]
    )  # fmt: skip
    flat = whole.column("ls").to_pylist()
    for name in ["a", "b"] if ask_sibling else ["b"]:
        rows = [
            [FILL if e is None or e[name] is None else e[name] for e in (r or [])] for r in flat
        ]
        lengths = np.array([len(r) for r in rows])
        np.testing.assert_array_equal(got[f"ls.{name}_lengths"], lengths)
        for i, r in enumerate(rows):
            np.testing.assert_array_equal(got[f"ls.{name}"][i, : len(r)], r)


@pytest.mark.parametrize("key", ["s", "s.a", "s.inner", "s.inner.x"])
def test_a_partition_key_named_as_a_struct_or_its_field_is_refused(tmp_path: Path, key: str):
    """`s=1/`, `s.a=1/` or `s.inner=1/` beside a struct s{a, inner{x}}: pyarrow refuses
    the first; flattened, the key would be delivered beside the struct's fields or
    silently lose to one."""
    for v in (1, 2):
        (tmp_path / f"{key}={v}").mkdir()
        pq.write_table(
            pa.table({"id": [v], "s": [{"a": 9, "inner": {"x": 5}}]}),
            tmp_path / f"{key}={v}" / "part.parquet",
        )
    with pytest.raises(shardfeed.SchemaMismatchError, match=rf"partition key '{key}' \(file"):
        shardfeed.Loader(tmp_path)
    got = loader_rows(tmp_path, ["id", "s.a"], partitioning=None)
    assert sorted(got["id"].tolist()) == [1, 2] and got["s.a"].tolist() == [9, 9]


def test_a_column_of_its_own_named_as_a_lists_field_is_no_field_of_the_list(tmp_path: Path):
    """A top-level column literally named `ls.b` (in b.parquet only) beside ls:
    list<struct<a>>: in a.parquet it is a column the file lacks (a null list), not
    nulls as long as ls's lists."""
    ls = pa.list_(pa.struct([("a", pa.int64())]))
    pq.write_table(pa.table({"ls": pa.array([[{"a": 1}] * 3], ls)}), tmp_path / "a.parquet")
    b = pa.table({"ls": pa.array([[{"a": 2}]], ls), "ls.b": pa.array([[7, 8]])})
    pq.write_table(b, tmp_path / "b.parquet")
    got = loader_rows(tmp_path, ["ls.b"])
    assert got["ls.b_lengths"].tolist() == [0, 2]
