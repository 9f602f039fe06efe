"""Built-in transforms against NumPy references; per-sample randomness that nothing changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import (
    Bucketize,
    Cast,
    Clip,
    FillNull,
    GaussianNoise,
    HashBucket,
    Log1p,
    RandomCrop,
    RandomMask,
    Standardize,
    Vocabulary,
)

from .conftest import digest

M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def run(tmp: Path, table: pa.Table, transforms, column: str, **kw) -> np.ndarray:
    """The column after the transforms, in natural order."""
    path = tmp / "t.parquet"
    pq.write_table(table, path, row_group_size=max(1, table.num_rows // 3))
    ld = shardfeed.Loader(
        path,
        batch_size=table.num_rows,
        shuffle=False,
        output="numpy",
        drop_last=False,
        columns=[column],
        transforms=transforms,
        **kw,
    )
    (batch,) = list(ld)
    return batch[column]


floats = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.none()),
    min_size=1,
    max_size=60,
)
finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)
ints = st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=60)
cfg = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def masked(values: list) -> tuple[np.ndarray, np.ndarray]:
    nulls = np.array([v is None for v in values])
    return np.array([0.0 if v is None else v for v in values], dtype=np.float32), nulls


@cfg
@given(values=floats, fill=finite)
def test_fill_null(tmp_path, values, fill):
    x, nulls = masked(values)
    got = run(
        tmp_path, pa.table({"v": pa.array(values, pa.float32())}), [FillNull("v", value=fill)], "v"
    )
    np.testing.assert_array_equal(got, np.where(nulls, np.float32(fill), x))


@cfg
@given(values=floats, lo=finite, width=st.floats(0, 1e6, width=32))
def test_clip(tmp_path, values, lo, width):
    hi = float(np.float32(lo + width))
    x, _ = masked(values)
    got = run(
        tmp_path,
        pa.table({"v": pa.array(values, pa.float32())}),
        [FillNull("v", value=0), Clip("v", min=lo, max=hi)],
        "v",
    )
    np.testing.assert_array_equal(got, np.clip(x, np.float32(lo), np.float32(hi)))


@cfg
@given(values=ints, lo=st.integers(-(2**62), 2**62), width=st.integers(0, 2**62))
def test_clip_integers_keep_every_bit(tmp_path, values, lo, width):
    # Bounds travel as float64: the ones it holds exactly (any integer up to 2**53, and
    # beyond that those it can hold) clip exactly; the others are refused (below).
    lo, hi = int(float(lo)), int(float(lo + width))
    got = run(
        tmp_path,
        pa.table({"v": pa.array(values, pa.int64())}),
        [Clip("v", min=lo, max=hi)],
        "v",
    )
    want = np.clip(np.array(values, dtype=object), lo, hi).astype(np.int64)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@cfg
@given(
    values=st.lists(finite, min_size=1, max_size=60),
    mean=finite,
    std=st.floats(0.0009765625, 1024.0, width=32),
)
def test_standardize(tmp_path, values, mean, std):
    x = np.array(values, dtype=np.float32)
    got = run(tmp_path, pa.table({"v": x}), [Standardize("v", mean=mean, std=std)], "v")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ((x.astype(np.float64) - mean) / std).astype(np.float32))


@cfg
@given(values=st.lists(st.floats(-0.5, 2.0**100, width=32), min_size=1, max_size=60))
def test_log1p(tmp_path, values):
    x = np.array(values, dtype=np.float32)
    got = run(tmp_path, pa.table({"v": x}), [Log1p("v")], "v")
    np.testing.assert_allclose(got, np.log1p(x.astype(np.float64)).astype(np.float32), rtol=1e-6)
    ints = run(tmp_path, pa.table({"v": np.arange(5, dtype=np.int32)}), [Log1p("v")], "v")
    assert ints.dtype == np.float32


@cfg
@given(values=ints, n=st.integers(1, 10**6))
def test_hash_bucket_integers(tmp_path, values, n):
    got = run(
        tmp_path,
        pa.table({"v": pa.array(values, pa.int64())}),
        [HashBucket("v", num_buckets=n)],
        "v",
    )
    want = [splitmix64(v & M64) % n for v in values]
    assert got.dtype == np.int64 and got.tolist() == want


@cfg
@given(values=st.lists(st.text(max_size=12), min_size=1, max_size=40), n=st.integers(1, 1000))
def test_hash_bucket_strings(tmp_path, values, n):
    got = run(
        tmp_path,
        pa.table({"v": pa.array(values, pa.string())}),
        [HashBucket("v", num_buckets=n)],
        "v",
    )
    assert got.tolist() == [fnv1a64(v.encode()) % n for v in values]


@cfg
@given(
    values=st.lists(st.floats(allow_nan=True, width=32), min_size=1, max_size=60),
    bounds=st.lists(finite, min_size=1, max_size=8, unique=True),
)
def test_bucketize(tmp_path, values, bounds):
    b = sorted(bounds)
    x = np.array(values, dtype=np.float32)
    got = run(tmp_path, pa.table({"v": x}), [Bucketize("v", boundaries=b)], "v")
    np.testing.assert_array_equal(
        got, np.searchsorted(np.array(b), x.astype(np.float64), side="right")
    )


@cfg
@given(
    values=st.lists(
        st.one_of(st.floats(-1e9, 1e9, width=32), st.just(float("nan"))), min_size=1, max_size=60
    ),
    dtype=st.sampled_from(["int8", "int32", "int64", "uint16", "bool", "float64"]),
)
def test_cast(tmp_path, values, dtype):
    x = np.array(values, dtype=np.float32)
    got = run(tmp_path, pa.table({"v": x}), [Cast("v", dtype=dtype)], "v")
    assert got.dtype == np.dtype(dtype)
    if dtype == "bool":
        want = x != 0
    elif dtype == "float64":
        want = x.astype(np.float64)
    else:
        info = np.iinfo(dtype)
        want = np.clip(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0)), info.min, info.max)
    np.testing.assert_array_equal(got, np.asarray(want).astype(dtype))


def test_cast_saturates_integers_as_it_does_floats(tmp_path):
    """An integer outside the dtype's range becomes its nearest bound, as a float does
    (NumPy's astype would wrap: 300 as int8 is 44, an id silently another id)."""
    ints = [300, -129, 2**40, -1, 0, 2**63 - 1, -(2**63)]
    unsigned = [2**64 - 1, 2**63, 0, 1, 255, 256]
    for values, arrow_type in ((ints, pa.int64()), (unsigned, pa.uint64())):
        for dtype in ("int8", "uint8", "int16", "uint32", "int64", "uint64"):
            got = run(tmp_path, pa.table({"v": pa.array(values, arrow_type)}),
                      [Cast("v", dtype=dtype)], "v")  # fmt: skip
            info = np.iinfo(dtype)
            want = [min(max(v, info.min), info.max) for v in values]
            assert got.dtype == np.dtype(dtype) and got.tolist() == want, (arrow_type, dtype)


def test_transforms_apply_to_list_elements_and_run_in_order(tmp_path):
    t = pa.table(
        {"v": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 3)}
    )
    got = run(tmp_path, t, [Standardize("v", mean=1, std=2), Clip("v", min=0, max=3)], "v")
    np.testing.assert_array_equal(got, np.clip((np.arange(12).reshape(4, 3) - 1) / 2, 0, 3))


# -- randomness ------------------------------------------------------------------------

RANDOM = [
    GaussianNoise("f0", std=1.0),
    RandomMask("f1", probability=0.3, value=-7.0),
    RandomCrop("seq", length=2),
]


def per_sample(batches, column="f0"):
    out = {}
    for b in batches:
        ids = np.asarray(b["sample_id"])
        vals = np.asarray(b[column])
        for i, v in zip(ids.tolist(), vals.tolist(), strict=True):
            out[i] = v
    return out


def random_loader(dataset, **kw):
    kw.setdefault("batch_size", 50)
    return shardfeed.Loader(
        dataset,
        transforms=RANDOM,
        with_sample_id=True,
        output="numpy",
        columns=["f0", "f1", "seq"],
        seed=21,
        **kw,
    )


def test_random_transforms_do_not_depend_on_threads_workers_ranks_or_resume(dataset):
    import torch

    base = list(random_loader(dataset, num_threads=1))
    assert digest(random_loader(dataset, num_threads=3)) == digest(base)
    ds = shardfeed.TorchDataset(
        dataset,
        transforms=RANDOM,
        with_sample_id=True,
        output="numpy",
        columns=["f0", "f1", "seq"],
        seed=21,
        batch_size=50,
    )
    assert digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)) == digest(base)
    reference = {c: per_sample(base, c) for c in ("f0", "f1", "seq")}
    for world in (2, 3):
        for rank in range(world):
            part = list(random_loader(dataset, rank=rank, world_size=world, batch_size=17))
            for c in ("f0", "f1", "seq"):
                got = per_sample(part, c)
                assert {i: reference[c][i] for i in got if i in reference[c]} == {
                    i: v for i, v in got.items() if i in reference[c]
                }
    # The same for batch sizes that cut the epoch differently, and after a resume.
    ld = random_loader(dataset, num_threads=2)
    it = iter(ld)
    for _ in range(4):
        next(it)
    again = random_loader(dataset)
    again.load_state_dict(json.loads(json.dumps(ld.state_dict())))
    assert digest(again) == digest(base[4:])


def test_noise_differs_between_epochs_and_samples(dataset):
    ld = random_loader(dataset, shuffle=False)
    e0 = per_sample(ld)
    ld.set_epoch(1)
    e1 = per_sample(ld)
    plain = per_sample(
        shardfeed.Loader(
            dataset,
            columns=["f0"],
            with_sample_id=True,
            output="numpy",
            batch_size=50,
            shuffle=False,
        )
    )
    d0 = np.array([e0[i] - plain[i] for i in sorted(e0)])
    d1 = np.array([e1[i] - plain[i] for i in sorted(e0)])
    assert not np.allclose(d0, d1)
    assert len(np.unique(d0)) > 0.99 * len(d0)


def test_distributions(tmp_path):
    n = 40_000
    path = tmp_path / "z.parquet"
    pq.write_table(
        pa.table({"z": np.zeros(n, np.float64), "m": np.ones(n, np.float32)}),
        path,
        row_group_size=5000,
    )
    ld = shardfeed.Loader(
        path,
        batch_size=5000,
        output="numpy",
        columns=["z", "m"],
        transforms=[GaussianNoise("z", std=2.0), RandomMask("m", probability=0.25)],
    )
    z = np.concatenate([b["z"] for b in ld])
    m = np.concatenate([b["m"] for b in ld])
    assert abs(z.mean()) < 0.05 and abs(z.std() - 2.0) < 0.05
    assert abs(np.mean(np.abs(z) < 2.0) - 0.6827) < 0.01  # normal, not just the right std
    assert abs((m == 0).mean() - 0.25) < 0.01


def test_random_crop(tmp_path):
    lists = [list(range(k)) for k in range(10)] * 20
    pq.write_table(pa.table({"s": lists}), tmp_path / "s.parquet")
    got_ld = shardfeed.Loader(
        tmp_path,
        batch_size=200,
        shuffle=False,
        output="numpy",
        transforms=[RandomCrop("s", length=4)],
    )
    (b,) = list(got_ld)
    offsets = set()
    for row, want in enumerate(lists):
        n = int(b["s_lengths"][row])
        assert n == min(len(want), 4)
        crop = b["s"][row, :n].tolist()
        start = crop[0] if crop else 0
        assert crop == want[start : start + n]
        if len(want) == 9:
            offsets.add(start)
    assert len(offsets) > 2  # different windows for different samples


# -- Python transforms and per-sample generators ------------------------------------------


def test_python_transform_runs_in_dataloader_workers(dataset):
    import torch

    def tag(batch):
        batch = dict(batch)
        batch["pid"] = np.full(len(batch["sample_id"]), os.getpid())
        batch["u"] = shardfeed.sample_uniform(batch, seed=3, epoch=0)[:, 0]
        return batch

    ds = shardfeed.TorchDataset(
        dataset, columns=["f0"], with_sample_id=True, batch_size=100, transform=tag
    )
    batches = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    pids = {int(b["pid"][0]) for b in batches}
    assert os.getpid() not in pids and len(pids) == 2
    ld = shardfeed.Loader(
        dataset, columns=["f0"], with_sample_id=True, batch_size=100, transform=tag, num_threads=1
    )
    same = {int(i): float(u) for b in ld for i, u in zip(b["sample_id"], b["u"], strict=True)}
    for b in batches:
        for i, u in zip(b["sample_id"].tolist(), b["u"].tolist(), strict=True):
            assert same[i] == u


def test_sample_rng_is_keyed_per_sample():
    a = shardfeed.sample_rng({"sample_id": np.array([5, 9])}, seed=1, epoch=2)
    b = shardfeed.sample_rng(np.array([9, 5]), seed=1, epoch=2)
    assert a[0].random() == b[1].random() and a[1].random() == b[0].random()
    c = shardfeed.sample_rng(np.array([5]), seed=1, epoch=3)
    assert c[0].random() != shardfeed.sample_rng(np.array([5]), seed=1, epoch=2)[0].random()
    u = shardfeed.sample_uniform(np.array([5, 9, 5]), seed=1, epoch=2, size=3)
    assert u.shape == (3, 3) and np.array_equal(u[0], u[2]) and not np.array_equal(u[0], u[1])
    with pytest.raises(ValueError, match="sample_id"):
        shardfeed.sample_rng({"x": np.zeros(2)}, seed=0, epoch=0)


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transform", "error", "match"),
    [
        (Standardize("nope", mean=0, std=1), KeyError, "'nope'"),
        (Standardize("f0", mean=0, std=0), ValueError, "std must be > 0"),
        (Standardize("f0", mean=0, std=-1), ValueError, "std must be > 0"),
        (HashBucket("label", num_buckets=0), ValueError, "num_buckets"),
        (
            HashBucket("label", num_buckets=2**63),
            ValueError,
            r"num_buckets must be in \[1, 2\*\*63\)",
        ),
        (
            HashBucket("label", num_buckets=1.5),
            TypeError,
            "'label': num_buckets must be an integer",
        ),
        (HashBucket("label", num_buckets=True), TypeError, "num_buckets must be an integer"),
        (RandomCrop("seq", length=2.0), TypeError, "RandomCrop on column 'seq': length"),
        (Bucketize("f0", boundaries=[1, 3, 2]), ValueError, "strictly increasing"),
        (Bucketize("f0", boundaries=[]), ValueError, "empty"),
        (HashBucket("f0", num_buckets=4), TypeError, "integer or string"),
        (RandomCrop("f0", length=2), TypeError, "variable-length list"),
        (RandomMask("f0", probability=1.5), ValueError, "probability"),
        (GaussianNoise("f0", std=-1), ValueError, "std must be >= 0"),
        (GaussianNoise("f0", std=float("inf")), ValueError, "std must be finite, got inf"),
        (Standardize("f0", mean=0, std=float("nan")), ValueError, "std must be finite, got nan"),
        (Standardize("f0", mean=0, std=1e-320), ValueError, "std must be at least 2.2e-308"),
        (Cast("f0", dtype="complex64"), ValueError, "dtype"),
        (Clip("f0", min=3, max=1), ValueError, "min > max"),
    ],
)
def test_bad_transforms_fail_at_construction(dataset, transform, error, match):
    with pytest.raises(error, match=match):
        shardfeed.Loader(dataset, columns=["f0", "label", "seq"], transforms=[transform])


def test_settings_that_are_not_numbers_fail_when_made():
    """True as a std, or a dict of per-feature values (whose keys would be read as the
    values), is a mistake; a fill or mask value or a Clip bound may be a bool (for a bool
    column), and a dtype a NumPy one."""
    for make, match in (
        (lambda: Standardize("x", mean=0, std=True), "std must be a number"),
        (lambda: RandomMask("x", probability=np.True_), "probability must be a number"),
        (lambda: Standardize("x", mean=[0.0, np.True_], std=1.0), "mean must hold numbers"),
        (lambda: GaussianNoise("x", std=[True, 1.0]), "std must hold numbers"),
        (lambda: FillNull("x", value={0: 1.0, 1: 2.0}), "not a dict"),
        (lambda: Standardize("x", mean={"f0": 1.0}, std=1.0), "not a dict"),
    ):
        with pytest.raises(shardfeed.ArgumentTypeError, match=match):
            make()
    assert FillNull("x", value=True).spec()["value"] is True
    assert Clip("x", min=False, max=True).spec()["max"] is True  # a bool column's bounds
    assert Cast("x", dtype=np.dtype("int8")).spec() == Cast("x", dtype=np.int8).spec() == Cast(
        "x", dtype="int8").spec()  # fmt: skip
    with pytest.raises(shardfeed.InvalidArgumentError, match="values is empty"):
        Vocabulary("s", [])
    assert Vocabulary("s", ["a"], oov=np.int64(-1)).spec()["oov"] == -1


def test_string_column_needs_hash_bucket_first(tmp_path):
    pq.write_table(pa.table({"s": ["a", "b"]}), tmp_path / "s.parquet")
    with pytest.raises(TypeError, match="HashBucket"):
        shardfeed.Loader(tmp_path, transforms=[Clip("s", min=0, max=1)])
    with pytest.raises(TypeError, match="string"):
        shardfeed.Loader(tmp_path)


def test_transform_on_an_unselected_column_is_refused(dataset):
    with pytest.raises(ValueError, match="not among the outputs"):
        shardfeed.Loader(dataset, columns=["f0"], transforms=[Log1p("f1")])


def test_state_dict_covers_the_transforms(dataset):
    state = random_loader(dataset).state_dict()
    other = shardfeed.Loader(
        dataset,
        transforms=[GaussianNoise("f0", std=2.0)],
        with_sample_id=True,
        output="numpy",
        columns=["f0", "f1", "seq"],
        seed=21,
        batch_size=50,
    )
    with pytest.raises(shardfeed.StateDictError, match="transforms"):
        other.load_state_dict(state)
    assert shardfeed.transforms.fingerprint(RANDOM) == shardfeed.transforms.fingerprint(
        list(RANDOM)
    )


def test_numpy_integer_settings_keep_the_state_dict_json(dataset):
    """num_buckets=np.int64(7) is 7: the same spec, and a state dict json.dumps takes."""
    assert HashBucket("label", num_buckets=np.int64(7)).spec() == HashBucket(
        "label", num_buckets=7).spec()  # fmt: skip
    assert RandomCrop("seq", length=np.int64(2)).spec() == RandomCrop("seq", length=2).spec()
    ld = shardfeed.Loader(dataset, columns=["label", "seq"], batch_size=50, output="numpy",
                          transforms=[HashBucket("label", num_buckets=np.int64(7)),
                                      RandomCrop("seq", length=np.int64(2))])  # fmt: skip
    next(iter(ld))
    state = json.loads(json.dumps(ld.state_dict()))
    again = shardfeed.Loader(dataset, columns=["label", "seq"], batch_size=50, output="numpy",
                             transforms=[HashBucket("label", num_buckets=7),
                                         RandomCrop("seq", length=2)])  # fmt: skip
    again.load_state_dict(state)


def test_a_python_transform_that_returns_no_dict_is_named(dataset):
    """A tensor output converts the dict's values, so anything else is the transform's
    mistake, said as such; a numpy output hands the result on as it is."""
    ld = shardfeed.Loader(dataset, columns=["f0"], batch_size=100, transform=lambda b: [b])
    with pytest.raises(shardfeed.ArgumentTypeError, match=r"transform= must return a dict.*list"):
        next(iter(ld))
    ld = shardfeed.Loader(dataset, columns=["f0"], batch_size=100, output="numpy",
                          transform=lambda b: b["f0"].sum())  # fmt: skip
    assert all(np.isscalar(x) for x in ld)


def test_random_mask_keeps_every_bit_of_what_it_does_not_mask(tmp_path):
    """RandomMask went through double: int64 values above 2^53 rounded, INT64_MAX
    wrapped to INT64_MIN.  It now writes in the column's own type."""
    ids = np.array([2**53 + 1, 2**62 + 3, 2**63 - 1, 1_700_000_000_123_456_789, 7])
    pq.write_table(pa.table({"uid": ids}), tmp_path / "a.parquet")

    def run(**kw):
        ld = shardfeed.Loader(tmp_path, columns=["uid"], batch_size=5, shuffle=False,
                              output="numpy", transforms=[RandomMask("uid", **kw)])  # fmt: skip
        return next(iter(ld))["uid"]

    assert run(probability=0.0).tolist() == ids.tolist()
    assert run(probability=1.0, value=-(2**63)).tolist() == [-(2**63)] * 5
    half = run(probability=0.5, value=0)
    assert set(half.tolist()) - set(ids.tolist()) <= {0}
    assert all(h in (0, i) for h, i in zip(half.tolist(), ids.tolist(), strict=True))


@pytest.mark.parametrize(
    ("column", "value"),
    [("u8", 300), ("u8", -1), ("i32", 2.5), ("i32", float("nan")), ("i32", 1e12), ("b", 5)],
)
def test_random_mask_values_must_fit_the_column(tmp_path, column, value):
    """As FillNull's: a value the column's type cannot hold is refused, naming the
    column (it was cast: 300 became 44 in a uint8, NaN INT32_MIN)."""
    pq.write_table(
        pa.table({"u8": pa.array([1, 2], pa.uint8()), "i32": pa.array([1, 2], pa.int32()),
                  "b": pa.array([True, False])}),
        tmp_path / "a.parquet",
    )  # fmt: skip
    with pytest.raises(shardfeed.InvalidArgumentError, match=f"RandomMask on column '{column}'"):
        shardfeed.Loader(tmp_path, columns=[column],
                         transforms=[RandomMask(column, probability=1.0, value=value)])  # fmt: skip
    stacked = {"s": ["u8", "u8"]} if column == "u8" else {"s": [column, column]}
    with pytest.raises(shardfeed.InvalidArgumentError, match="RandomMask on stack 's'"):
        shardfeed.Loader(tmp_path, stack=stacked, columns=[],
                         transforms=[RandomMask("s", probability=1.0, value=value)])  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [
        lambda: Clip("x", max=2**53 + 1),
        lambda: Clip("x", min=np.int64(-(2**62) - 1)),
        lambda: FillNull("x", value=[0, 2**63 - 1]),
        lambda: RandomMask("x", probability=0.5, value=10**400),
        lambda: Bucketize("x", boundaries=[0, 2**53 + 1]),
    ],
)
def test_integer_settings_that_float64_would_round_are_refused(make):
    # Settings travel as float64: a bound of 2**53 + 1 on an int64 column would
    # silently clamp at 2**53.
    with pytest.raises(shardfeed.InvalidArgumentError, match="float64 cannot hold exactly"):
        make()


def test_integer_settings_that_float64_holds_are_kept():
    assert Clip("x", min=-(2**53), max=2**60).spec()["max"] == 2**60
    assert FillNull("x", value=[1, 2**53]).spec()["value"] == [1.0, float(2**53)]


@cfg
@given(
    values=ints,
    bounds=st.lists(
        st.one_of(
            st.integers(-(2**53), 2**53).map(float),
            st.floats(-1e19, 1e19, allow_nan=False),
            st.sampled_from([float(2**53), 2.0**53 + 2, 2.0**63, -(2.0**63), 0.5, -0.5]),
        ),
        min_size=1,
        max_size=8,
        unique=True,
    ),
)
def test_bucketize_integers_compares_exactly(tmp_path, values, bounds):
    """int64 values past 2**53 are compared as integers, not rounded to float64 first:
    the bucket is how many boundaries are <= the value, as Python compares them."""
    b = sorted(bounds)
    got = run(tmp_path, pa.table({"v": pa.array(values, pa.int64())}), [Bucketize("v", b)], "v")
    assert got.tolist() == [sum(x <= v for x in b) for v in values]


def test_bucketize_integers_at_the_edges_of_their_types(tmp_path):
    near = [2**53, 2**53 + 1, 2**53 + 2, 2**53 + 3]
    got = run(tmp_path, pa.table({"v": pa.array(near, pa.int64())}),
              [Bucketize("v", [float(2**53 + 4)])], "v")  # fmt: skip
    assert got.tolist() == [0, 0, 0, 0]  # through float64, 2**53 + 3 became 2**53 + 4
    big = [0, 2**63 - 1, 2**63, 2**64 - 1]  # uint64 past int64's range: not wrapped
    got = run(tmp_path, pa.table({"v": pa.array(big, pa.uint64())}),
              [Bucketize("v", [-1.0, 2.0**63, 2.0**64])], "v")  # fmt: skip
    assert got.tolist() == [1, 1, 2, 2]
    small = [-128, -1, 0, 1, 127]
    got = run(tmp_path, pa.table({"v": pa.array(small, pa.int8())}),
              [Bucketize("v", [-1000.0, -0.5, 0.5, 126.5, 1000.0])], "v")  # fmt: skip
    assert got.tolist() == [1, 1, 2, 3, 4]


@pytest.mark.parametrize(("lo", "hi"), [(0.2, 0.8), (300, 400), (-400, -300), (127.5, 1000)])
def test_clip_that_no_integer_of_the_column_satisfies_is_refused(tmp_path, lo, hi):
    """Clamping int8 values to [0.2, 0.8] would give 1 (outside it), to [300, 400] 127:
    a range that holds no value of the column's type is refused by name."""
    table = pa.table({"v": pa.array([-5, 0, 1, 5], pa.int8())})
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"holds no int8 value"):
        run(tmp_path, table, [Clip("v", min=lo, max=hi)], "v")
    # One that holds one is kept, clamping to it.
    assert run(tmp_path, table, [Clip("v", min=0.2, max=1.5)], "v").tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize(
    ("arrow_type", "lo", "hi", "ok"),
    [
        (pa.bool_(), 0.2, 0.8, False),
        (pa.bool_(), 2, 3, False),
        (pa.bool_(), 0.5, None, True),
        (pa.int64(), 2**63, None, False),  # past int64's largest value, 2**63 - 1
        (pa.int64(), None, 2**62, True),
        (pa.uint64(), 2**64, None, False),
        (pa.uint64(), 2**63, None, True),
    ],
)
def test_clip_at_the_edges_of_bool_and_64_bit_types(tmp_path, arrow_type, lo, hi, ok):
    table = pa.table({"v": pa.array([0, 1], pa.int64()).cast(arrow_type)})
    if ok:
        got = run(tmp_path, table, [Clip("v", min=lo, max=hi)], "v")
        assert len(got) == 2
    else:
        with pytest.raises(shardfeed.InvalidArgumentError, match=r"holds no"):
            run(tmp_path, table, [Clip("v", min=lo, max=hi)], "v")


def test_a_vocabulary_value_that_is_no_unicode_text_is_refused_by_name():
    with pytest.raises(shardfeed.InvalidArgumentError, match=r"'s': value 1 .* not valid Unicode"):
        shardfeed.transforms.Vocabulary("s", values=["ok", "bad\udcff"])
