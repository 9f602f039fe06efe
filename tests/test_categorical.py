"""Categorical strings (HashBucket, Vocabulary, shardfeed.vocabulary) and fill_null checks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from shardfeed.transforms import GaussianNoise, HashBucket, Vocabulary

from .conftest import digest
from .test_transforms import fnv1a64

# Skewed ids with ties, a non-ASCII value, the empty string and nulls.
WORDS = ["us", "ca", "de", "fr", "jp", "ü", "", "br", "in", "mx"]


def words(n: int, seed: int) -> list[str | None]:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.6, n) - 1, len(WORDS) - 1)
    out: list[str | None] = [WORDS[r] for r in ranks]
    for i in rng.choice(n, n // 10, replace=False):
        out[i] = None
    return out


VALUES = words(900, 1)
N_BUCKETS = 97


def write(root: Path, array: pa.Array, name: str = "c.parquet", rg: int = 250) -> Path:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"id": np.arange(len(array)), "s": array}), root / name, row_group_size=rg
    )
    return root


ENCODINGS = {
    "string": lambda v: pa.array(v, pa.string()),
    "large_string": lambda v: pa.array(v, pa.large_string()),
    "string_view": lambda v: pa.array(v, pa.string_view()),
    "dictionary_int8": lambda v: (
        pa.array(v, pa.string()).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.string()))
    ),
    "dictionary_int32": lambda v: pa.array(v, pa.string()).dictionary_encode(),
}


def read_all(root: Path, transforms, column: str = "s", **kw) -> np.ndarray:
    ld = shardfeed.Loader(
        root,
        batch_size=10_000,
        shuffle=False,
        output="numpy",
        drop_last=False,
        columns=[column],
        transforms=transforms,
        **kw,
    )
    return np.concatenate([b[column] for b in ld])


def python_values(root: Path) -> list[str | None]:
    """The column as pyarrow reads it (categoricals as their values)."""
    col = pq.read_table(root, columns=["s"]).column("s")
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col.to_pylist()


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_hash_bucket_is_the_same_for_every_string_encoding(tmp_path, encoding):
    root = write(tmp_path, ENCODINGS[encoding](VALUES))
    if encoding.startswith("dictionary"):
        assert pa.types.is_dictionary(pq.read_schema(root / "c.parquet").field("s").type)
    got = read_all(root, [HashBucket("s", num_buckets=N_BUCKETS)], fill_null=-1)
    want = [-1 if v is None else fnv1a64(v.encode()) % N_BUCKETS for v in VALUES]
    assert got.dtype == np.int64
    assert got.tolist() == want


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_vocabulary_matches_a_dict_lookup(tmp_path, encoding):
    root = write(tmp_path, ENCODINGS[encoding](VALUES))
    values = ["de", "us", "ü", "", "zz-never"]
    got = read_all(root, [Vocabulary("s", values)])
    index = {v: k + 1 for k, v in enumerate(values)}
    assert got.dtype == np.int64
    assert got.tolist() == [index.get(v, 0) if v is not None else 0 for v in python_values(root)]
    # oov for unknown values and for nulls alike, with no fill_null needed.
    got = read_all(root, [Vocabulary("s", values, oov=-7)])
    assert got.tolist() == [index.get(v, -7) if v is not None else -7 for v in VALUES]


def test_pandas_and_polars_categoricals(tmp_path):
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    frame = pd.DataFrame({"id": np.arange(len(VALUES)), "s": pd.Categorical(VALUES)})
    for sub in ("pandas", "polars"):
        (tmp_path / sub).mkdir()
    frame.to_parquet(tmp_path / "pandas" / "p.parquet", index=False)
    pl.DataFrame(
        {"id": np.arange(len(VALUES)), "s": pl.Series(VALUES, dtype=pl.Categorical)}
    ).write_parquet(tmp_path / "polars" / "p.parquet")
    plain = write(tmp_path / "plain", pa.array(VALUES, pa.string()))
    values = shardfeed.vocabulary(plain, "s")
    for sub in ("pandas", "polars"):
        root = tmp_path / sub
        schema_type = pq.read_schema(next(root.iterdir())).field("s").type
        assert pa.types.is_dictionary(schema_type), (sub, schema_type)
        assert python_values(root) == VALUES
        buckets = read_all(root, [HashBucket("s", num_buckets=N_BUCKETS)], fill_null=-1)
        assert (
            buckets.tolist()
            == read_all(plain, [HashBucket("s", num_buckets=N_BUCKETS)], fill_null=-1).tolist()
        ), sub
        got = read_all(root, [Vocabulary("s", values)])
        assert got.tolist() == read_all(plain, [Vocabulary("s", values)]).tolist(), sub
        assert shardfeed.vocabulary(root, "s") == values, sub


def reference_vocabulary(values, min_count=1, max_size=None) -> list[str]:
    counts = Counter(v for v in values if v is not None)
    ranked = sorted(
        (v for v, n in counts.items() if n >= min_count), key=lambda v: (-counts[v], v.encode())
    )
    return ranked if max_size is None else ranked[:max_size]


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_vocabulary_builder_against_counter(tmp_path, encoding):
    # Several files and row groups; ties between equally frequent values.
    parts = [words(700, 2), words(333, 3), ["b", "a", "c", "a", "b", "c", None]]
    for i, part in enumerate(parts):
        write(tmp_path, ENCODINGS[encoding](part), name=f"sub{i % 2}/f{i}.parquet", rg=100)
    every = [v for part in parts for v in part]
    assert shardfeed.vocabulary(tmp_path, "s") == reference_vocabulary(every)
    for min_count, max_size in [(2, None), (5, 3), (1, 0), (10**9, None)]:
        got = shardfeed.vocabulary(tmp_path, "s", min_count=min_count, max_size=max_size)
        assert got == reference_vocabulary(every, min_count, max_size), (min_count, max_size)
    runs = {tuple(shardfeed.vocabulary(tmp_path, "s", num_threads=t)) for t in (1, 2, 3, 1, 3)}
    assert len(runs) == 1


def test_vocabulary_builder_errors(tmp_path):
    write(tmp_path, pa.array(["a", "b"]))
    with pytest.raises(shardfeed.ColumnNotFoundError, match="nope"):
        shardfeed.vocabulary(tmp_path, "nope")
    with pytest.raises(shardfeed.UnsupportedTypeError, match=r"'id'.*int64"):
        shardfeed.vocabulary(tmp_path, "id")
    with pytest.raises(shardfeed.InvalidArgumentError, match="min_count"):
        shardfeed.vocabulary(tmp_path, "s", min_count=0)
    with pytest.raises(shardfeed.InvalidArgumentError, match="max_size"):
        shardfeed.vocabulary(tmp_path, "s", max_size=-1)
    with pytest.raises(TypeError, match="min_count"):
        shardfeed.vocabulary(tmp_path, "s", min_count=1.5)  # type: ignore[arg-type]


def test_string_columns_without_a_string_transform_say_which_accept_them(tmp_path):
    write(tmp_path, ENCODINGS["dictionary_int8"](VALUES))
    with pytest.raises(shardfeed.UnsupportedTypeError, match="HashBucket and Vocabulary"):
        shardfeed.Loader(tmp_path)
    with pytest.raises(shardfeed.UnsupportedTypeError, match="needs a string column"):
        shardfeed.Loader(tmp_path, transforms=[Vocabulary("id", ["a"])])


def test_vocabulary_arguments():
    with pytest.raises(TypeError, match="values"):
        Vocabulary("s", "abc")
    with pytest.raises(TypeError, match="strings"):
        Vocabulary("s", ["a", 1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="oov"):
        Vocabulary("s", ["a"], oov=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"listed twice.*column 's'"):
        Vocabulary("s", ["a", "b", "a"])._core_spec()
    # The spec holds a digest, not the list: state dicts stay small.
    big = Vocabulary("s", [f"v{i}" for i in range(100_000)])
    spec = big.spec()
    assert spec["num_values"] == 100_000 and len(str(spec)) < 300
    assert spec != Vocabulary("s", [f"v{i}" for i in range(1, 100_001)]).spec()
    assert Vocabulary("s", ["a"]) == Vocabulary("s", ("a",))


def stream(root: Path, **kw):
    return shardfeed.Loader(
        root,
        batch_size=64,
        seed=3,
        output="numpy",
        with_sample_id=True,
        transforms=[Vocabulary("s", ["us", "ca", "ü", ""]), GaussianNoise("x", std=0.1)],
        **kw,
    )


def test_vocabulary_stream_same_with_threads_and_a_warm_decoded_tier(tmp_path):
    root = tmp_path / "data"
    for i in range(3):
        part = words(400, 10 + i)
        root.mkdir(exist_ok=True)
        pq.write_table(
            pa.table(
                {"s": pa.array(part).dictionary_encode(), "x": np.arange(400, dtype=np.float32)}
            ),
            root / f"f{i}.parquet",
            row_group_size=128,
        )
    reference = digest(stream(root, num_threads=1))
    assert digest(stream(root, num_threads=3)) == reference
    cache = tmp_path / "cache"
    cold = stream(root, num_threads=3, cache_dir=cache, cache_decoded=True)
    assert digest(cold) == reference
    warm = stream(root, num_threads=2, cache_dir=cache, cache_decoded=True)
    assert digest(warm) == reference
    assert warm.stats()["decoded_hits"] > 0
    # Another list is another cache entry, never the stale one.
    other = shardfeed.Loader(
        root,
        batch_size=64,
        seed=3,
        output="numpy",
        with_sample_id=True,
        transforms=[Vocabulary("s", ["ca", "us"]), GaussianNoise("x", std=0.1)],
        cache_dir=cache,
        cache_decoded=True,
    )
    plain = shardfeed.Loader(
        root,
        batch_size=64,
        seed=3,
        output="numpy",
        with_sample_id=True,
        transforms=[Vocabulary("s", ["ca", "us"]), GaussianNoise("x", std=0.1)],
    )
    assert digest(other) == digest(plain) != reference
    # The values are part of the settings a state dict must match.
    with pytest.raises(shardfeed.StateDictError, match="transforms"):
        plain.load_state_dict(stream(root).state_dict())


# fill_null: exact or refused at construction, naming the column.
def fill_dataset(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    t = pa.table(
        {
            "u8": pa.array([1, None, 3], pa.uint8()),
            "i8": pa.array([1, None, 3], pa.int8()),
            "i32": pa.array([1, None, 3], pa.int32()),
            "b": pa.array([True, None, False]),
            "f32": pa.array([1.5, None, 3.0], pa.float32()),
        }
    )
    pq.write_table(t, root / "n.parquet")
    return root


@pytest.mark.parametrize(
    ("columns", "fill", "match"),
    [
        (["u8"], -1, "column 'u8'.*-1.*uint8"),
        (["u8"], 256, "column 'u8'.*uint8"),
        (["i32"], 2.5, "column 'i32'.*2.5.*int32"),
        (["b"], 2, "column 'b'.*bool"),
        (["i8"], 300, "column 'i8'.*int8"),
        (["i8"], float("nan"), "column 'i8'.*NaN"),
        (["f32"], 1e39, "column 'f32'.*float32"),
        (None, {"u8": 0, "i32": 0.5}, "column 'i32'"),
        (["u8"], {"u8": 1, "nope": 1}, "'nope' is not among the outputs"),
    ],
)
def test_fill_null_that_the_type_cannot_hold_is_refused(tmp_path, columns, fill, match):
    root = fill_dataset(tmp_path)
    with pytest.raises(shardfeed.InvalidArgumentError, match=match):
        shardfeed.Loader(root, columns=columns, fill_null=fill)


def test_fill_null_checks_every_stacked_column(tmp_path):
    root = fill_dataset(tmp_path)
    with pytest.raises(ValueError, match="column 'u8'"):
        shardfeed.Loader(root, columns=[], stack={"x": ["f32", "u8"]}, fill_null=-1)
    ld = shardfeed.Loader(
        root,
        columns=[],
        stack={"x": ["f32", "i8"]},
        fill_null=-1,
        output="numpy",
        shuffle=False,
        batch_size=3,
    )
    (batch,) = list(ld)
    assert batch["x"].tolist() == [[1.5, 1], [-1, -1], [3, 3]]


def test_fill_null_per_column(tmp_path):
    root = fill_dataset(tmp_path)
    fill = {"u8": 255, "i8": -128, "i32": 7, "b": True, "f32": 2.5}
    ld = shardfeed.Loader(root, fill_null=fill, output="numpy", shuffle=False, batch_size=3)
    (batch,) = list(ld)
    assert batch["u8"].tolist() == [1, 255, 3]
    assert batch["i8"].tolist() == [1, -128, 3]
    assert batch["i32"].tolist() == [1, 7, 3]
    assert batch["b"].tolist() == [True, True, False]
    assert batch["f32"].tolist() == [1.5, 2.5, 3.0]
    # Columns not in the dict keep the default: a null is an error.
    ld = shardfeed.Loader(root, fill_null={"u8": 0}, output="numpy", shuffle=False, batch_size=3)
    with pytest.raises(shardfeed.InvalidDataError, match="column 'i8'"):
        list(ld)
    # The dict is part of the settings, in a stable (sorted) form.
    a = shardfeed.Loader(root, fill_null={"u8": 0, "i8": 1})
    b = shardfeed.Loader(root, fill_null={"i8": 1, "u8": 0})
    b.load_state_dict(a.state_dict())
    c = shardfeed.Loader(root, fill_null={"i8": 1, "u8": 1})
    with pytest.raises(shardfeed.StateDictError, match="fill_null"):
        c.load_state_dict(a.state_dict())
    with pytest.raises(TypeError, match="fill_null"):
        shardfeed.Loader(root, fill_null={"u8": "x"})
    with pytest.raises(TypeError, match="fill_null"):
        shardfeed.Loader(root, fill_null={1: 0})


def test_files_with_other_string_encodings_and_hive_string_keys(tmp_path):
    # One column stored as string, dictionary and large_string in three files,
    # under Hive folders whose key is a string column too.
    parts = {"us": words(300, 20), "c a": words(200, 21), "de": words(100, 22)}
    encodings = ["string", "dictionary_int8", "large_string"]
    for (country, part), encoding in zip(parts.items(), encodings, strict=True):
        folder = tmp_path / f"country={country.replace(' ', '%20')}"
        write(folder, ENCODINGS[encoding](part), name="part-0", rg=64)
    every = [v for part in parts.values() for v in part]
    # Catalog order: by relative path ("country=c%20a" < "country=de" < "country=us").
    order = sorted(parts, key=lambda c: c.replace(" ", "%20"))
    in_order = [v for c in order for v in parts[c]]
    countries = [c for c in order for _ in parts[c]]
    assert shardfeed.vocabulary(tmp_path, "s") == reference_vocabulary(every)
    assert shardfeed.vocabulary(tmp_path, "country") == reference_vocabulary(countries)
    got = read_all(tmp_path, [HashBucket("s", num_buckets=N_BUCKETS)], fill_null=-1)
    assert got.tolist() == [-1 if v is None else fnv1a64(v.encode()) % N_BUCKETS for v in in_order]
    values = ["us", "de", "ü", ""]
    got = read_all(tmp_path, [Vocabulary("s", values)])
    index = {v: k + 1 for k, v in enumerate(values)}
    assert got.tolist() == [index.get(v, 0) if v is not None else 0 for v in in_order]
    got = read_all(tmp_path, [HashBucket("country", num_buckets=N_BUCKETS)], column="country")
    assert got.tolist() == [fnv1a64(c.encode()) % N_BUCKETS for c in countries]
    got = read_all(tmp_path, [Vocabulary("country", ["de", "c a"])], column="country")
    assert got.tolist() == [{"de": 1, "c a": 2}.get(c, 0) for c in countries]


def test_vocabulary_matches_columns_by_name_across_files(tmp_path):
    # Schema evolution: another column order, an added column, a file without it.
    a, b = words(300, 30), words(200, 31)
    pq.write_table(pa.table({"id": np.arange(300), "s": a}), tmp_path / "a.parquet")
    pq.write_table(
        pa.table({"s": pa.array(b).dictionary_encode(), "n": np.zeros(200), "id": np.arange(200)}),
        tmp_path / "b.parquet",
    )
    pq.write_table(pa.table({"id": np.arange(50)}), tmp_path / "c.parquet")
    assert shardfeed.vocabulary(tmp_path, "s") == reference_vocabulary(a + b)
    got = read_all(tmp_path, [Vocabulary("s", ["us", "de"])])
    assert got.tolist() == [{"us": 1, "de": 2}.get(v, 0) if v else 0 for v in a + b + [None] * 50]
