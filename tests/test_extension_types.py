"""Columns of Arrow extension types (a UUID, a tensor, JSON, pandas' period) are
read as their storage: the same values a column of the storage type gives."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import shardfeed
from shardfeed.transforms import HashBucket, Vocabulary

from .conftest import digest
from .test_structs import loader_rows as rows


def test_a_fixed_shape_tensor_is_a_batch_of_tensors(tmp_path: Path):
    """Embeddings and images stored as arrow.fixed_shape_tensor: [batch, *shape], the
    tensors as numpy holds them, the stream the same for any thread count."""
    data = np.random.default_rng(0).random((1_000, 4, 8), dtype=np.float32)
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(data)
    pq.write_table(pa.table({"emb": tensors, "y": np.arange(1_000)}), tmp_path / "t.parquet",
                   row_group_size=300)  # fmt: skip
    got = rows(tmp_path, ["emb", "y"])
    assert got["emb"].dtype == np.float32 and got["emb"].shape == (1_000, 4, 8)
    np.testing.assert_array_equal(got["emb"], data)
    kw: dict[str, Any] = dict(batch_size=64, seed=1, columns=["emb", "y"])
    base = digest(shardfeed.Loader(tmp_path, num_threads=1, **kw))
    assert digest(shardfeed.Loader(tmp_path, num_threads=3, **kw)) == base
    for _ in range(2):  # the decoded tier, cold and warm
        ld = shardfeed.Loader(tmp_path, cache_dir=tmp_path / "c", cache_decoded=True, **kw)
        assert digest(ld) == base


def test_a_permuted_tensor_comes_in_its_physical_shape(tmp_path: Path):
    """The permutation transposes the stored tensor into the logical view pyarrow gives."""
    data = np.random.default_rng(2).random((100, 4, 8), dtype=np.float32)
    t = pa.fixed_shape_tensor(pa.float32(), [4, 8], permutation=[1, 0])
    permuted = pa.ExtensionArray.from_storage(
        t, pa.array(data.reshape(100, -1).tolist(), t.storage_type)
    )
    pq.write_table(pa.table({"emb": permuted}), tmp_path / "p.parquet")
    got = rows(tmp_path, ["emb"])["emb"]
    np.testing.assert_array_equal(got, data)
    np.testing.assert_array_equal(got.transpose(0, 2, 1), permuted.to_numpy_ndarray())


def test_uuids_and_json_hash_and_look_up_as_their_bytes_and_strings(tmp_path: Path):
    ids = [uuid.UUID(int=i * 7919).bytes for i in range(50)]
    docs = [f'{{"k": {i % 5}}}' for i in range(50)]
    ext = tmp_path / "ext"
    ext.mkdir()
    pq.write_table(
        pa.table({"u": pa.array(ids, pa.uuid()), "j": pa.array(docs, pa.json_())}),
        ext / "e.parquet",
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"u": pa.array(ids, pa.binary(16)), "j": docs}), plain / "p.parquet")
    transforms = [HashBucket("u", 1_000), Vocabulary("j", docs[:3]), HashBucket("j", 77)]
    got = rows(ext, ["u", "j"], transforms=transforms[:2])
    want = rows(plain, ["u", "j"], transforms=transforms[:2])
    for name in ("u", "j"):
        np.testing.assert_array_equal(got[name], want[name])
    assert set(np.unique(got["j"])) == {1, 2, 3, 0}
    assert shardfeed.vocabulary(ext, "j") == sorted(set(docs))
    # A UUID column written as an extension in one file and as plain bytes in another.
    pq.write_table(pa.table({"u": pa.array(ids[:5], pa.binary(16))}), ext / "f.parquet")
    both = rows(ext, ["u"], transforms=[Vocabulary("u", ids)], fill_null=0)
    np.testing.assert_array_equal(both["u"], list(range(1, 51)) + list(range(1, 6)))


def test_pandas_periods_and_bool8_are_their_integers(tmp_path: Path):
    periods = pd.period_range("2020-01-01", periods=6, freq="D")
    pd.DataFrame({"p": periods}).to_parquet(tmp_path / "p.parquet")
    np.testing.assert_array_equal(rows(tmp_path / "p.parquet", ["p"])["p"], periods.asi8)
    b8 = pa.ExtensionArray.from_storage(pa.bool8(), pa.array([1, 0, 1], pa.int8()))
    pq.write_table(pa.table({"b": b8}), tmp_path / "b.parquet")
    got = rows(tmp_path / "b.parquet", ["b"])["b"]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [1, 0, 1])


def test_the_vocabulary_of_binary_ids_is_bytes_ready_for_vocabulary(tmp_path: Path):
    """UUIDs as arrow.uuid, fixed_size_binary or binary (and lists of them): the
    builder lists bytes, most frequent first, which Vocabulary maps back."""
    rng = np.random.default_rng(3)
    pool = [uuid.UUID(int=int(i) * 104729).bytes for i in range(12)]
    picks = [pool[int(i)] for i in rng.zipf(1.6, 400) % 12]
    for name, array in [
        ("uuid", pa.array(picks, pa.uuid())),
        ("fsb", pa.array(picks, pa.binary(16))),
        ("bin", pa.array(picks, pa.binary())),
        ("list", pa.array([[p] for p in picks], pa.list_(pa.binary(16)))),
    ]:
        pq.write_table(pa.table({"u": array}), tmp_path / f"{name}.parquet")
        values = shardfeed.vocabulary(tmp_path / f"{name}.parquet", "u")
        counts = Counter(picks)
        assert values == sorted(counts, key=lambda v: (-counts[v], v)), name
        assert all(isinstance(v, bytes) for v in values)
        got = rows(tmp_path / f"{name}.parquet", ["u"], transforms=[Vocabulary("u", values)])
        ids = got["u"].reshape(len(picks))
        assert [values[int(i) - 1] for i in ids] == picks, name
    # A string column still gives str.
    pq.write_table(pa.table({"s": ["b", "a", "b"]}), tmp_path / "s.parquet")
    assert shardfeed.vocabulary(tmp_path / "s.parquet", "s") == ["b", "a"]
