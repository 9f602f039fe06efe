"""Transforms on a stack: per-feature settings, one random stream per sample."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shardfeed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shardfeed.transforms import (
    Clip,
    FillNull,
    GaussianNoise,
    Log1p,
    RandomCrop,
    RandomMask,
    Standardize,
    fingerprint,
)

from .conftest import digest

FEATS = [f"f{i}" for i in range(8)]

cfg = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def stacks(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Values [rows, F] with nulls, and per-feature settings."""
    f = draw(st.integers(1, 6))
    rows = draw(st.integers(1, 40))
    value = st.floats(-1e4, 1e4, width=32)
    x = np.array(draw(st.lists(value, min_size=rows * f, max_size=rows * f)), np.float32)
    nulls = np.array(draw(st.lists(st.booleans(), min_size=rows * f, max_size=rows * f)))
    vec = st.lists(value, min_size=f, max_size=f)
    lo = np.array(draw(vec))
    width = np.array(draw(st.lists(st.floats(0, 1e4), min_size=f, max_size=f)))
    setting = {
        "fill": np.array(draw(vec)),
        "mean": np.array(draw(vec)),
        "std": np.array(draw(st.lists(st.floats(1e-3, 1e3), min_size=f, max_size=f))),
        "lo": lo,
        "hi": lo + width,
    }
    return x.reshape(rows, f), nulls.reshape(rows, f), setting


def stacked(tmp: Path, x: np.ndarray, nulls: np.ndarray, transforms, **kw) -> np.ndarray:
    cols = {f"c{j}": pa.array(x[:, j], mask=nulls[:, j]) for j in range(x.shape[1])}
    pq.write_table(pa.table(cols), tmp / "t.parquet", row_group_size=max(1, len(x) // 3))
    ld = shardfeed.Loader(
        tmp / "t.parquet",
        stack={"s": list(cols)},
        batch_size=len(x),
        shuffle=False,
        output="numpy",
        drop_last=False,
        transforms=transforms,
        **kw,
    )
    (batch,) = list(ld)
    return batch["s"]


@cfg
@given(case=stacks())
def test_per_feature_settings_compute_their_formula(tmp_path, case):
    x, nulls, s = case
    got = stacked(
        tmp_path,
        x,
        nulls,
        [
            FillNull("s", value=list(s["fill"])),
            Standardize("s", mean=s["mean"], std=list(s["std"])),
            Clip("s", min=s["lo"], max=list(s["hi"])),
        ],
    )
    filled = np.where(nulls, s["fill"].astype(np.float32), x)
    want = ((filled.astype(np.float64) - s["mean"]) / s["std"]).astype(np.float32)
    want = np.clip(want, s["lo"].astype(np.float32), s["hi"].astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@cfg
@given(case=stacks())
def test_one_setting_for_every_feature_is_the_column_transform(tmp_path, case):
    x, nulls, s = case
    f = x.shape[1]
    mean, std = float(s["mean"][0]), float(s["std"][0])
    on_stack = stacked(
        tmp_path,
        x,
        nulls,
        [Standardize("s", mean=mean, std=std), Log1p("s")],
        fill_null=0.0,
    )
    per_column = stacked(
        tmp_path,
        x,
        nulls,
        [t for j in range(f) for t in (Standardize(f"c{j}", mean=mean, std=std), Log1p(f"c{j}"))],
        fill_null=0.0,
    )
    # fill_null fills after the columns' transforms, before the stack's: the
    # nulls differ, the rest agrees to the bit.
    np.testing.assert_array_equal(on_stack[~nulls], per_column[~nulls])


NOISE = [
    FillNull("feats", value=0.0),
    GaussianNoise("feats", std=[0.5 * (j + 1) for j in range(8)]),
    RandomMask("feats", probability=0.3, value=[-(j + 1.0) for j in range(8)]),
]


def noisy(dataset, kind=shardfeed.Loader, **kw):
    kw.setdefault("batch_size", 50)
    return kind(
        dataset,
        stack={"feats": FEATS},
        columns=["label"],
        transforms=NOISE,
        with_sample_id=True,
        output="numpy",
        seed=5,
        **kw,
    )


def rows_by_id(batches) -> dict[int, bytes]:
    out = {}
    for b in batches:
        for i, row in zip(np.asarray(b["sample_id"]).tolist(), np.asarray(b["feats"]), strict=True):
            out[i] = row.tobytes()
    return out


def test_stack_randomness_does_not_depend_on_threads_workers_ranks_or_resume(dataset):
    import torch

    base = list(noisy(dataset, num_threads=1))
    assert digest(noisy(dataset, num_threads=3)) == digest(base)
    ds = noisy(dataset, kind=shardfeed.TorchDataset)
    assert digest(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)) == digest(base)
    reference = rows_by_id(base)
    for world in (2, 3):
        for rank in range(world):
            part = rows_by_id(noisy(dataset, rank=rank, world_size=world, batch_size=17))
            assert {i: reference[i] for i in part if i in reference} == {
                i: v for i, v in part.items() if i in reference
            }
    ld = noisy(dataset, num_threads=2)
    it = iter(ld)
    for _ in range(3):
        next(it)
    again = noisy(dataset)
    again.load_state_dict(json.loads(json.dumps(ld.state_dict())))
    assert digest(again) == digest(base[3:])


def test_a_samples_values_do_not_depend_on_the_filter_or_the_cache(dataset, tmp_path):
    everything = rows_by_id(noisy(dataset, shuffle=False, drop_last=False))
    kept = rows_by_id(noisy(dataset, shuffle=False, drop_last=False, filter=[("id", ">=", 700)]))
    assert kept and all(i >= 700 for i in kept)
    assert {i: everything[i] for i in kept} == kept
    cold = digest(noisy(dataset))
    cached = noisy(dataset, cache_dir=tmp_path / "c", cache_decoded=True)
    assert digest(cached) == cold  # fills the decoded tier
    assert digest(cached) == cold  # from it: the stack's transforms still run


def test_noise_and_mask_follow_their_per_feature_settings(tmp_path):
    n, f = 40_000, 4
    zeros = {f"z{j}": np.zeros(n, np.float64) for j in range(f)}
    pq.write_table(pa.table(zeros), tmp_path / "z.parquet", row_group_size=5000)
    std = np.array([0.5, 1.0, 2.0, 4.0])

    def draw(transforms):
        ld = shardfeed.Loader(
            tmp_path,
            stack={"z": list(zeros)},
            batch_size=5000,
            output="numpy",
            transforms=transforms,
        )
        return np.concatenate([b["z"] for b in ld])

    z = draw([GaussianNoise("z", std=std)])
    assert z.dtype == np.float64
    assert np.all(np.abs(z.mean(0)) < 0.03 * std)
    assert np.all(np.abs(z.std(0) / std - 1) < 0.02)
    u = (z / std).ravel()  # the ziggurat's body, wedges and tail
    assert abs(np.mean(np.abs(u) < 1.0) - 0.6827) < 0.006
    assert abs(np.mean(np.abs(u) > 2.0) - 0.0455) < 0.003
    assert abs(np.mean(np.abs(u) > 3.442619855899) - 0.000576) < 0.0003
    # Features of one sample are independent draws, not one value repeated.
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 0.03
    m = draw([RandomMask("z", probability=[0.0, 0.1, 0.5, 1.0], value=[1, 2, 3, 4])])
    share = (m != 0).mean(0)
    assert share[0] == 0 and share[3] == 1
    assert abs(share[1] - 0.1) < 0.01 and abs(share[2] - 0.5) < 0.01
    assert set(np.unique(m[:, 2])) == {0.0, 3.0}


@pytest.mark.parametrize(
    ("transform", "error", "match"),
    [
        (Standardize("feats", mean=[0.0] * 3), ValueError, "3 values, the stack has 8 features"),
        (Standardize("feats", std=[1.0] * 7 + [0.0]), ValueError, r"feature 7 \(column 'f7'\)"),
        (Clip("feats", min=[1.0] * 8, max=[0.0] * 8), ValueError, "min > max"),
        (Standardize("f0", mean=[0.0, 1.0]), ValueError, "need a stack"),
        (RandomCrop("feats", length=2), TypeError, "variable-length list"),
        (Log1p("label"), ValueError, "not among the outputs"),
    ],
)
def test_bad_stack_transforms_fail_at_construction(dataset, transform, error, match):
    with pytest.raises(error, match=match):
        shardfeed.Loader(dataset, stack={"feats": FEATS}, columns=["id"], transforms=[transform])


def test_stack_fill_comes_first_and_stack_names_are_not_columns(dataset):
    with pytest.raises(ValueError, match="must come first"):
        shardfeed.Loader(
            dataset,
            stack={"feats": FEATS},
            transforms=[Log1p("feats"), FillNull("feats", value=0.0)],
        )
    with pytest.raises(ValueError, match="both a stack and a column"):
        shardfeed.Loader(dataset, stack={"label": FEATS}, transforms=[Log1p("label")])
    with pytest.raises(TypeError, match="list of numbers"):
        Standardize("feats", mean="0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        Standardize("feats", mean=[])


def test_fingerprint_follows_the_values_not_their_container():
    a = Standardize("feats", mean=[0, 1, 2], std=np.array([1.0, 2.0, 3.0]))
    b = Standardize("feats", mean=np.arange(3.0), std=[1, 2, 3])
    c = Standardize("feats", mean=[0, 1, 2.5], std=[1, 2, 3])
    assert fingerprint([a]) == fingerprint([b]) != fingerprint([c])
    assert json.loads(json.dumps(a.spec()))["mean"] == [0.0, 1.0, 2.0]
    # A scalar setting keeps its old spec, so existing state dicts still load.
    assert Standardize("f0", mean=0.5, std=2).spec() == {
        "op": "Standardize",
        "column": "f0",
        "mean": 0.5,
        "std": 2,
    }


def test_fill_of_a_float16_stack_is_the_number_not_its_bits(tmp_path):
    """FillNull on a stack of float16 columns stored the fill's integer as the half's
    bits (1.0 became 0x0001, 6e-08)."""
    half = np.array([0.5, 0, 2.5], np.float16)
    pq.write_table(pa.table({"a": pa.array(half, mask=np.array([False, True, False])),
                             "b": pa.array(half, mask=np.array([True, False, False]))}),
                   tmp_path / "f.parquet")  # fmt: skip
    for fill, want in ((1.0, [1.0, 1.0]), ([1.0, 3.0], [1.0, 3.0])):
        ld = shardfeed.Loader(tmp_path, stack={"x": ["a", "b"]}, columns=[], batch_size=3,
                              shuffle=False, output="numpy",
                              transforms=[FillNull("x", value=fill)])  # fmt: skip
        (batch,) = list(ld)
        assert batch["x"].dtype == np.float16
        assert batch["x"][1, 0] == want[0] and batch["x"][0, 1] == want[1], batch["x"]


@pytest.mark.parametrize("stack", [False, True])
def test_float_transforms_of_integers_see_every_digit(tmp_path, stack):
    """An int64 or timestamp column was made float32 before (x - mean) / std: epoch
    milliseconds 1.7e12 and 1.7e12 + 1000 became one value, and all three a constant."""
    ms = np.array([1_700_000_000_000, 1_700_000_001_000, 1_700_000_030_000])
    ids = np.array([16_777_217, 16_777_218, 16_777_219])
    pq.write_table(pa.table({"t": pa.array(ms, pa.timestamp("ms")), "i": ids}),
                   tmp_path / "f.parquet")  # fmt: skip
    for column, mean, std, want in (("t", 1.7e12, 1000.0, [0, 1, 30]),
                                    ("i", 16_777_216.0, 1.0, [1, 2, 3])):  # fmt: skip
        spec = Standardize("s" if stack else column, mean=mean, std=std)
        kw = {"stack": {"s": [column]}, "columns": []} if stack else {"columns": [column]}
        ld = shardfeed.Loader(tmp_path, batch_size=3, shuffle=False, output="numpy",
                              transforms=[spec], **kw)  # fmt: skip
        (batch,) = list(ld)
        got = batch["s" if stack else column]
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.reshape(-1), np.float32(want))
    # Log1p too: from the exact integer, rounded once.
    ld = shardfeed.Loader(tmp_path, columns=["i"], batch_size=3, shuffle=False, output="numpy",
                          transforms=[Log1p("i")])  # fmt: skip
    np.testing.assert_array_equal(
        next(iter(ld))["i"], np.log1p(ids.astype(np.float64)).astype(np.float32)
    )


@pytest.mark.parametrize("cache", [False, True])
def test_a_stacks_fill_is_its_own_when_its_column_is_read_elsewhere_too(tmp_path, cache):
    """FillNull on a stack fills its members' nulls, also those of a member another output
    reads under the column's own fill_null (a column of its own, a second stack): each
    output gets its own fill, from the decoded tier (cold and warm) as without it."""
    data = tmp_path / "d"
    data.mkdir()
    pq.write_table(pa.table({"a": pa.array([0.5, None, 2.5], pa.float32()),
                             "b": pa.array([1.0, 2.0, None], pa.float32())}),
                   data / "p.parquet")  # fmt: skip
    kw: dict = dict(batch_size=3, shuffle=False, output="numpy", drop_last=False)
    if cache:
        kw |= dict(cache_dir=tmp_path / "cache", cache_decoded=True)
    for _ in range(2 if cache else 1):  # a cold pass, then one from the tier
        loader = shardfeed.Loader(data, stack={"x": ["a", "b"], "y": ["a"]}, columns=["a"],
                                  fill_null={"a": 99.0},
                                  transforms=[FillNull("x", value=-1.0)], **kw)  # fmt: skip
        (batch,) = list(loader)
        assert batch["x"].tolist() == [[0.5, 1.0], [-1.0, 2.0], [2.5, -1.0]]
        assert batch["a"].tolist() == [0.5, 99.0, 2.5]
        assert batch["y"].tolist() == [[0.5], [99.0], [2.5]]
        loader.close()
    # Without a fill of its own the column's null is still an error, naming it.
    with pytest.raises(shardfeed.InvalidDataError, match="'a'"):
        list(shardfeed.Loader(data, stack={"x": ["a", "b"]}, columns=["a"],
                              transforms=[FillNull("x", value=-1.0)], batch_size=3))  # fmt: skip
