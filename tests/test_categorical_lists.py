"""Lists of categorical strings (tags, histories) and fixed-width binary ids (UUIDs)
through HashBucket, Vocabulary and shardfeed.vocabulary, checked against Python."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import HashBucket, Vocabulary

from .conftest import digest
from .test_categorical import reference_vocabulary
from .test_transforms import fnv1a64

TAGS = ["us", "ca", "ü", "", "de", "a b"]
N = 53  # buckets

# A row: None (a null list) or a list whose elements may be null.
ROWS = st.lists(
    st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from(TAGS)), max_size=5)),
    min_size=1,
    max_size=60,
)

LIST_TYPES = {
    "list": lambda rows: pa.array(rows, pa.list_(pa.string())),
    "large_list": lambda rows: pa.array(rows, pa.large_list(pa.large_string())),
    "list_of_dictionary": lambda rows: pa.array(rows, pa.list_(pa.string())).cast(
        pa.list_(pa.dictionary(pa.int32(), pa.string()))
    ),
    "list_of_binary": lambda rows: pa.array(
        [None if r is None else [None if v is None else v.encode() for v in r] for r in rows],
        pa.list_(pa.binary()),
    ),
}


def write(root: Path, array: pa.Array, rg: int = 7, name: str = "t.parquet") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"t": array}), root / name, row_group_size=rg)
    return root


def read(root: Path, transforms, **kw) -> dict[str, np.ndarray]:
    """Every row of column t in natural order, padded to the longest list."""
    ld = shardfeed.Loader(
        root,
        batch_size=1_000,
        shuffle=False,
        output="numpy",
        drop_last=False,
        columns=["t"],
        transforms=transforms,
        **kw,
    )
    (batch,) = list(ld)
    return batch


def padded(rows: list[list[int]]) -> tuple[list[list[int]], list[int]]:
    width = max((len(r) for r in rows), default=0)
    return [r + [0] * (width - len(r)) for r in rows], [len(r) for r in rows]


@pytest.mark.parametrize("kind", sorted(LIST_TYPES))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=ROWS)
def test_hash_bucket_on_lists_of_strings_matches_python(tmp_path_factory, kind, rows):
    root = write(tmp_path_factory.mktemp(kind), LIST_TYPES[kind](rows))
    got = read(root, [HashBucket("t", num_buckets=N)], fill_null=-1)
    # A null element is filled; a null list becomes an empty one (as for lists of numbers).
    want = [
        [] if r is None else [-1 if v is None else fnv1a64(v.encode()) % N for v in r] for r in rows
    ]
    values, lengths = padded(want)
    assert got["t_lengths"].tolist() == lengths
    assert got["t"].dtype == np.int64
    if got["t"].shape[1]:
        assert got["t"].tolist() == values
    else:
        assert all(length == 0 for length in lengths)


@pytest.mark.parametrize("kind", sorted(LIST_TYPES))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=ROWS)
def test_vocabulary_on_lists_of_strings_matches_a_dict_lookup(tmp_path_factory, kind, rows):
    root = write(tmp_path_factory.mktemp(kind), LIST_TYPES[kind](rows))
    values = ["ca", "ü", "", "never"]
    index = {v: k + 1 for k, v in enumerate(values)}
    got = read(root, [Vocabulary("t", values, oov=-5)], fill_null=0)
    want = [[] if r is None else [index.get(v, -5) if v else -5 if v is None else index[""]
                                  for v in r] for r in rows]  # fmt: skip
    values_, lengths = padded(want)
    assert got["t_lengths"].tolist() == lengths
    if got["t"].shape[1]:
        assert got["t"].tolist() == values_
    # A null element is the oov index with no fill_null; a null list still needs one.
    if any(r is None for r in rows):
        first = next(i for i, r in enumerate(rows) if r is None)  # row groups of 7 rows
        where = rf"row group {first // 7}, column 't': null list at row {first % 7} "
        with pytest.raises(shardfeed.InvalidDataError, match=where):
            read(root, [Vocabulary("t", values)])
    else:
        assert read(root, [Vocabulary("t", values)])["t_lengths"].tolist() == lengths


def test_fixed_size_lists_of_strings(tmp_path):
    rows = [["us", "ca"], ["ü", None], None, ["", "us"], ["x", "y"]] * 3
    root = write(tmp_path, pa.array(rows, pa.list_(pa.string(), 2)), rg=4)
    got = read(root, [HashBucket("t", num_buckets=N)], fill_null=-1)
    # Every element of a null fixed-size list is null, so filled.
    want = [[-1, -1] if r is None else [-1 if v is None else fnv1a64(v.encode()) % N for v in r]
            for r in rows]  # fmt: skip
    assert got["t"].shape == (len(rows), 2)
    assert got["t"].tolist() == want
    values = ["us", "ü"]
    got = read(root, [Vocabulary("t", values)])
    index = {v: k + 1 for k, v in enumerate(values)}
    want = [[0, 0] if r is None else [index.get(v, 0) if v is not None else 0 for v in r]
            for r in rows]  # fmt: skip
    assert got["t"].tolist() == want
    assert shardfeed.vocabulary(root, "t") == reference_vocabulary(
        [v for r in rows if r is not None for v in r]
    )


def test_a_list_element_hashes_like_the_same_string_in_a_plain_column(tmp_path):
    rows = [["us", "ca", "ü"], ["", "de"]]
    lists = read(write(tmp_path / "l", pa.array(rows)), [HashBucket("t", num_buckets=N)])
    flat = [v for r in rows for v in r]
    plain = read(write(tmp_path / "p", pa.array(flat)), [HashBucket("t", num_buckets=N)])
    got = [
        v
        for row, n in zip(lists["t"].tolist(), lists["t_lengths"].tolist(), strict=True)
        for v in row[:n]
    ]
    assert got == plain["t"].tolist()


def test_fixed_size_binary_ids_hash_like_their_bytes(tmp_path):
    ids = [uuid.UUID(int=(i * 7919) % 13).bytes for i in range(40)] + [None]
    fixed = write(tmp_path / "fixed", pa.array(ids, pa.binary(16)), rg=9)
    binary = write(tmp_path / "binary", pa.array(ids, pa.binary()), rg=9)
    assert pq.read_schema(fixed / "t.parquet").field("t").type == pa.binary(16)
    got = read(fixed, [HashBucket("t", num_buckets=N)], fill_null=-1)
    want = [-1 if v is None else fnv1a64(v) % N for v in ids]
    assert got["t"].tolist() == want
    assert read(binary, [HashBucket("t", num_buckets=N)], fill_null=-1)["t"].tolist() == want
    # Lists of them too.
    rows = [ids[i : i + 3] for i in range(0, 39, 3)]
    listed = write(tmp_path / "listed", pa.array(rows, pa.list_(pa.binary(16))))
    got = read(listed, [HashBucket("t", num_buckets=N)])
    assert got["t"].tolist() == [[fnv1a64(v) % N for v in r] for r in rows]
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'t'.*fixed_size_binary.*HashBucket"):
        shardfeed.Loader(fixed, columns=["t"])


@pytest.mark.parametrize("kind", sorted(LIST_TYPES))
def test_vocabulary_builder_counts_list_elements(tmp_path, kind):
    rng = np.random.default_rng(4)
    rows: list[list[str | None] | None] = []
    for _ in range(300):
        if rng.random() < 0.1:
            rows.append(None)
        else:
            rows.append([None if rng.random() < 0.1 else TAGS[min(rng.zipf(1.5) - 1, 5)]
                         for _ in range(rng.integers(0, 4))])  # fmt: skip
    for i in range(3):  # several files and row groups
        write(
            tmp_path, LIST_TYPES[kind](rows[i * 100 : (i + 1) * 100]), rg=30, name=f"f{i}.parquet"
        )
    elements = [v for r in rows if r is not None for v in r]
    if kind == "list_of_binary":  # the same values, as bytes
        got = shardfeed.vocabulary(tmp_path, "t")
        assert got == [v.encode() for v in reference_vocabulary(elements)]
        return
    assert shardfeed.vocabulary(tmp_path, "t") == reference_vocabulary(elements)
    assert shardfeed.vocabulary(tmp_path, "t", min_count=3, max_size=2) == reference_vocabulary(
        elements, 3, 2
    )
    assert Counter(elements)  # the data holds values to count


def test_lists_of_strings_need_a_string_transform(tmp_path):
    root = write(tmp_path, pa.array([["a"], ["b", "c"]]))
    with pytest.raises(
        shardfeed.UnsupportedTypeError, match=r"'t'.*elements are strings.*HashBucket"
    ):
        shardfeed.Loader(root, columns=["t"])
    nested = write(tmp_path / "n", pa.array([[["a"]], [["b"]]]))
    with pytest.raises(shardfeed.UnsupportedTypeError, match="nested lists"):
        shardfeed.Loader(nested, columns=["t"], transforms=[HashBucket("t", num_buckets=3)])


def test_list_stream_same_with_threads_shuffle_and_a_warm_decoded_tier(tmp_path):
    rng = np.random.default_rng(9)
    root = tmp_path / "data"
    for f in range(3):
        rows = [[TAGS[j] for j in rng.integers(0, 6, rng.integers(0, 5))] for _ in range(300)]
        root.mkdir(exist_ok=True)
        pq.write_table(
            pa.table({"t": pa.array(rows), "x": np.arange(300, dtype=np.int64)}),
            root / f"f{f}.parquet",
            row_group_size=64,
        )

    def stream(**kw):
        return shardfeed.Loader(
            root,
            batch_size=50,
            seed=5,
            output="numpy",
            with_sample_id=True,
            transforms=[Vocabulary("t", ["us", "ü", ""]), HashBucket("x", num_buckets=7)],
            **kw,
        )

    reference = digest(stream(num_threads=1))
    assert digest(stream(num_threads=3)) == reference
    cache = tmp_path / "cache"
    assert digest(stream(num_threads=3, cache_dir=cache, cache_decoded=True)) == reference
    warm = stream(num_threads=2, cache_dir=cache, cache_decoded=True)
    assert digest(warm) == reference
    assert warm.stats()["decoded_hits"] > 0


def test_files_with_other_list_encodings_map_alike(tmp_path):
    rows = [["us", "ü"], [], None, ["", "ca", "us"]] * 4
    for kind in ("list", "large_list", "list_of_dictionary"):
        write(tmp_path, LIST_TYPES[kind](rows), name=f"{kind}.parquet", rg=5)
    hashed = read(tmp_path, [HashBucket("t", num_buckets=N)], fill_null=0)
    mapped = read(tmp_path, [Vocabulary("t", ["us", "ca"])], fill_null=0)
    one = [[] if r is None else r for r in rows]
    assert hashed["t_lengths"].tolist() == [len(r) for r in one] * 3
    for got, f in ((hashed, lambda v: fnv1a64(v.encode()) % N), (mapped, {"us": 1, "ca": 2}.get)):
        want, _ = padded([[f(v) or 0 for v in r] for r in one * 3])
        assert got["t"].tolist() == want
    assert shardfeed.vocabulary(tmp_path, "t") == ["us", "", "ca", "ü"]


def test_vocabulary_of_bytes_maps_binary_ids(tmp_path):
    ids = [uuid.UUID(int=i % 5).bytes for i in range(20)] + [None]
    root = write(tmp_path, pa.array(ids, pa.binary(16)), rg=6)
    values = [uuid.UUID(int=3).bytes, uuid.UUID(int=1).bytes]
    got = read(root, [Vocabulary("t", values, oov=-1)])
    index = {v: k + 1 for k, v in enumerate(values)}
    assert got["t"].tolist() == [-1 if v is None else index.get(v, -1) for v in ids]
    # A str stands for its UTF-8 bytes: the same table, the same duplicate check.
    text = write(tmp_path / "s", pa.array(["ü", "a", None]))
    assert read(text, [Vocabulary("t", ["ü".encode(), "a"])])["t"].tolist() == [1, 2, 0]
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"listed twice.*column 't'"):
        shardfeed.Loader(text, columns=["t"], transforms=[Vocabulary("t", ["a", b"a"])])
    with pytest.raises(TypeError, match="strings"):
        Vocabulary("t", [1])  # type: ignore[list-item]
    # Lists of str keep the digest earlier versions gave (state dicts stay valid);
    # bytes give their own.
    blob = json.dumps(["us", "ü"], ensure_ascii=False).encode()
    assert Vocabulary("t", ["us", "ü"]).spec()["values_sha256"] == hashlib.sha256(blob).hexdigest()
    assert Vocabulary("t", [b"us", "ü"]).spec() != Vocabulary("t", ["us", "ü"]).spec()
