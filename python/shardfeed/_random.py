"""Per-sample randomness for Python transforms, keyed like the built-in ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _core
from ._check import check_int
from ._errors import ArgumentTypeError, InvalidArgumentError

# Counter words for Python streams; the engine's own streams sit far below.
_USER_BASE = 1 << 20


def _key(seed: Any, epoch: Any, stream: Any) -> tuple[int, int, int]:
    """The generator's key words, checked: 64-bit unsigned, as the engine's."""
    return (
        check_int("seed", seed, (0, 2**64)),
        check_int("epoch", epoch, (0, 2**64)),
        check_int("stream", stream, (0, 2**64 - _USER_BASE)),
    )


def _ids(batch_or_ids: Mapping[str, Any] | Any) -> np.ndarray:
    if isinstance(batch_or_ids, Mapping):
        if "sample_id" not in batch_or_ids:
            raise InvalidArgumentError("the batch has no 'sample_id': pass with_sample_id=True")
        batch_or_ids = batch_or_ids["sample_id"]
    given = batch_or_ids
    ids = np.asarray(given.numpy() if hasattr(given, "numpy") else given)
    # Ids are integers: a float id would be cut (1.5 drawing as 1), a string parsed.
    if ids.dtype.kind not in "iu" and not (ids.size == 0 and ids.dtype.kind == "f"):  # [] is float
        raise ArgumentTypeError(
            "sample ids must be integers (a batch's 'sample_id', made with with_sample_id=True), "
            f"got {type(given).__name__} of dtype {ids.dtype}"
        )
    if ids.ndim > 1:
        raise InvalidArgumentError(
            f"sample ids must be one id per sample (1-D), got shape {ids.shape}"
        )
    if ids.size and (ids.min() < 0 or (ids.dtype.kind == "u" and ids.max() >= 2**63)):
        raise InvalidArgumentError("sample ids must be in [0, 2**63)")
    return ids.astype(np.int64, copy=False).reshape(-1)


def sample_rng(
    batch: Mapping[str, Any] | Any, seed: int, epoch: int, stream: int = 0
) -> list[np.random.Generator]:
    """One NumPy generator per sample of ``batch``, keyed by (seed, epoch, stream, sample id).

    ``batch`` is a batch made with ``with_sample_id=True`` (or an array of sample
    ids).  The generator of a sample is the same in every process, worker, rank
    and after a resume, and differs between epochs: Philox4x64 with key
    ``(seed, epoch)`` and counter ``(2**20 + stream, sample_id, 0, 0)``.  For
    whole-batch draws without a Python object per sample, use ``sample_uniform``.
    """
    seed, epoch, stream = _key(seed, epoch, stream)
    return [
        np.random.Generator(
            np.random.Philox(key=[seed, epoch], counter=[_USER_BASE + stream, int(i), 0, 0])
        )
        for i in _ids(batch)
    ]


def sample_uniform(
    batch: Mapping[str, Any] | Any, seed: int, epoch: int, stream: int = 0, size: int = 1
) -> np.ndarray:
    """``[n, size]`` uniforms in [0, 1), row i keyed by (seed, epoch, stream, sample id i).

    Drawn in C++ by the same counter-based generator as the built-in random
    transforms, so it costs no Python per sample.
    """
    seed, epoch, stream = _key(seed, epoch, stream)
    size = check_int("size", size, (1, 2**31))
    ids = np.ascontiguousarray(_ids(batch), dtype=np.int64)
    return _core.sample_uniform(ids, seed, epoch, stream, size)
