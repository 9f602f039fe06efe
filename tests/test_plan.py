"""Properties of the pure plan, over random datasets and settings (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from shardfeed import _core

row_groups = st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12)


def options(**kw) -> _core.PlanOptions:
    o = _core.PlanOptions()
    for k, v in kw.items():
        setattr(o, k, v)
    return o


@settings(max_examples=150, deadline=None)
@given(
    rows=row_groups,
    seed=st.integers(0, 2**64 - 1),
    epoch=st.integers(0, 1000),
    window=st.integers(1, 5),
    shuffle=st.booleans(),
)
def test_each_epoch_is_a_permutation(rows, seed, epoch, window, shuffle):
    o = options(
        seed=seed,
        epoch=epoch,
        window_row_groups=window,
        shuffle=shuffle,
        batch_size=7,
        drop_last=False,
    )
    ids = np.array(_core.plan_sample_ids(rows, o))
    assert np.array_equal(np.sort(ids), np.arange(sum(rows)))
    if not shuffle:
        assert np.array_equal(ids, np.arange(sum(rows)))
    assert np.array_equal(ids, np.array(_core.plan_sample_ids(rows, o)))  # pure


@settings(max_examples=150, deadline=None)
@given(
    rows=row_groups,
    seed=st.integers(0, 1000),
    world=st.integers(1, 6),
    batch=st.integers(1, 9),
    drop_last=st.booleans(),
    window=st.integers(1, 4),
)
def test_ranks_are_disjoint_equal_slices_of_one_order(rows, seed, world, batch, drop_last, window):
    n = sum(rows)
    base = options(seed=seed, window_row_groups=window, batch_size=1, drop_last=False)
    whole = np.array(_core.plan_sample_ids(rows, base))  # the global order, any world size
    parts, counts = [], []
    for r in range(world):
        o = options(
            seed=seed,
            window_row_groups=window,
            batch_size=batch,
            world_size=world,
            rank=r,
            drop_last=drop_last,
        )
        try:
            sizes = _core.plan_batch_sizes(rows, o)
        except ValueError:
            # Only drop_last=False can be infeasible: fewer rows than ranks x batches.
            assert not drop_last
            per_rank = (n + world - 1) // world  # the largest rank
            assert n // world < (per_rank + batch - 1) // batch
            return
        parts.append(np.array(_core.plan_sample_ids(rows, o)))
        counts.append(len(sizes))
        assert sum(sizes) == len(parts[-1])
        assert all(1 <= s <= batch for s in sizes)
        if drop_last:
            assert all(s == batch for s in sizes)
    assert len(set(counts)) == 1  # equal batch counts
    allids = np.concatenate(parts)
    assert len(np.unique(allids)) == len(allids)  # disjoint
    # Concatenated in rank order, the slices are a prefix of the global order.
    assert np.array_equal(allids, whole[: len(allids)])
    if drop_last:
        assert len(allids) == (n // (world * batch)) * world * batch
    else:
        assert len(allids) == n


def test_other_epoch_or_seed_other_order():
    rows = [50] * 8
    a = _core.plan_sample_ids(rows, options(seed=1, epoch=0, batch_size=10))
    b = _core.plan_sample_ids(rows, options(seed=1, epoch=1, batch_size=10))
    c = _core.plan_sample_ids(rows, options(seed=2, epoch=0, batch_size=10))
    assert a != b and a != c and sorted(a) == sorted(b) == sorted(c)


def test_window_mixes_only_inside_windows():
    rows = [10] * 6
    ids = np.array(
        _core.plan_sample_ids(
            rows, options(seed=3, window_row_groups=2, batch_size=1, drop_last=False)
        )
    )
    for w in range(3):
        groups = set((ids[w * 20 : (w + 1) * 20] // 10).tolist())
        assert len(groups) == 2  # each window holds exactly two whole row groups


def test_batch_size_one_needs_samples_that_divide_among_the_ranks():
    """Not only tiny datasets: with batch_size=1 a rank one sample short cannot make as
    many non-empty batches as the others, however many rows there are."""
    import pytest

    rows = [1_000_001]
    o = options(seed=0, window_row_groups=1, batch_size=1, world_size=2, rank=0, drop_last=False)
    with pytest.raises(ValueError, match=r"smallest rank has 500000 samples .*divide evenly"):
        _core.plan_batch_sizes(rows, o)
    o.batch_size = 2
    assert len(_core.plan_batch_sizes(rows, o)) == 250_001
