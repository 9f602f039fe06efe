"""Push-down transforms: declared as data, run by the C++ engine's workers.

Pass a list to ``Loader(..., transforms=[...])`` or ``TorchDataset(...)``; they run
in order on each decoded row group, before ``stack``.  Each takes the column first,
then keyword settings::

    from shardfeed.transforms import Standardize, HashBucket, GaussianNoise
    transforms = [
        Standardize("f0", mean=0.5, std=2.0),
        HashBucket("user_id", num_buckets=1000),
        GaussianNoise("x", std=0.1),
    ]

Random transforms (``GaussianNoise``, ``RandomMask``, ``RandomCrop``) draw from a
counter-based generator keyed by (seed, epoch, position of the transform in the
list, the sample's natural-order id): a sample gets the same values with any
thread count, DataLoader worker count, world size, or after a resume, and other
values in another epoch.  Only the transforms before the first random one are
deterministic; that prefix is what a decoded cache may store, the rest always
runs after it.

Type rules: ``Standardize``, ``Log1p`` and ``GaussianNoise`` give float64 for
float64 input and float32 otherwise; ``HashBucket`` and ``Bucketize`` give int64;
``Cast`` gives its dtype; the others keep the type.  On list columns the
element-wise transforms apply to every element.  ``HashBucket`` maps integer ids
to ``splitmix64(id) % num_buckets`` and strings to ``fnv1a64(utf8 bytes) %
num_buckets`` (a string column needs HashBucket or Vocabulary as its first
transform; dictionary<string> columns, such as pandas and polars categoricals,
hash like the same strings stored plainly).  ``Vocabulary`` maps strings to
int64 indices ``1..len(values)``, ``oov`` (0) for the rest and for nulls.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from . import _core
from ._errors import ArgumentTypeError, InvalidArgumentError

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "float64")  # fmt: skip


@dataclass(frozen=True)
class Transform:
    """Base class: one operation on one column."""

    column: str
    random: ClassVar[bool] = False

    def spec(self) -> dict[str, Any]:
        """Plain data: the transform's name and settings (stable, JSON-serializable)."""
        return {"op": type(self).__name__, **asdict(self)}

    def _core_spec(self) -> _core.TransformSpec:
        raise NotImplementedError

    def _base(self) -> _core.TransformSpec:
        if not isinstance(self.column, str) or not self.column:
            raise InvalidArgumentError(f"{type(self).__name__}: column must be a non-empty name")
        t = _core.TransformSpec()
        t.op = type(self).__name__
        t.column = self.column
        return t


@dataclass(frozen=True)
class Cast(Transform):
    """Converts to ``dtype`` (a numpy name: "float32", "int64", "bool", ...)."""

    dtype: str = "float32"

    def _core_spec(self) -> _core.TransformSpec:
        if self.dtype not in _DTYPES:
            raise InvalidArgumentError(f"Cast on column '{self.column}': dtype must be one of "
                                       f"{_DTYPES}, got {self.dtype!r}")  # fmt: skip
        t = self._base()
        t.dtype = self.dtype
        return t


@dataclass(frozen=True)
class FillNull(Transform):
    """Replaces nulls with ``value``."""

    value: float = 0.0

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a = float(self.value)
        return t


@dataclass(frozen=True)
class Clip(Transform):
    """Clamps to [min, max]; ``None`` leaves that side open."""

    min: float | None = None
    max: float | None = None

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a = -math.inf if self.min is None else float(self.min)
        t.b = math.inf if self.max is None else float(self.max)
        return t


@dataclass(frozen=True)
class Standardize(Transform):
    """``(x - mean) / std``; std must be > 0."""

    mean: float = 0.0
    std: float = 1.0

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.b = float(self.mean), float(self.std)
        return t


@dataclass(frozen=True)
class Log1p(Transform):
    """``log(1 + x)``."""

    def _core_spec(self) -> _core.TransformSpec:
        return self._base()


@dataclass(frozen=True)
class HashBucket(Transform):
    """Integer or string ids to a bucket index in [0, num_buckets)."""

    num_buckets: int = 1

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.n = int(self.num_buckets)
        return t


@dataclass(frozen=True)
class Bucketize(Transform):
    """Index of the bucket: how many boundaries are <= x (strictly increasing boundaries)."""

    boundaries: Sequence[float] = field(default_factory=tuple)

    def spec(self) -> dict[str, Any]:
        return {"op": "Bucketize", "column": self.column,
                "boundaries": [float(b) for b in self.boundaries]}  # fmt: skip

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.boundaries = [float(b) for b in self.boundaries]
        return t


@dataclass(frozen=True)
class GaussianNoise(Transform):
    """Adds N(0, std^2) noise, drawn per sample and element."""

    std: float = 1.0
    random: ClassVar[bool] = True

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a = float(self.std)
        return t


@dataclass(frozen=True)
class RandomMask(Transform):
    """Replaces each element with ``value`` with the given probability."""

    probability: float = 0.1
    value: float = 0.0
    random: ClassVar[bool] = True

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.b = float(self.probability), float(self.value)
        return t


@dataclass(frozen=True)
class RandomCrop(Transform):
    """Crops each variable-length list to at most ``length`` elements at a random offset."""

    length: int = 1
    random: ClassVar[bool] = True

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.n = int(self.length)
        return t


@dataclass(frozen=True)
class Vocabulary(Transform):
    """Strings to int64 indices: ``values[k]`` becomes ``k + 1``; a value not in
    the list, and a null, becomes ``oov`` (so a null never raises here).

    Exact: bytes are compared after a hash probe, so two strings never share an
    index.  Takes string, large_string, string_view and dictionary<string>
    columns (pandas and polars categoricals), as the column's first transform.
    Build ``values`` with ``shardfeed.vocabulary(source, column)``.

    The lookup table is built once, in C++, when the transform is first used.
    In ``spec()`` (and so in a state dict) the values appear as their number
    and a SHA-256 digest of the list, not the list itself, so that a vocabulary
    of millions of ids keeps state dicts small.
    """

    values: Sequence[str] = field(default_factory=tuple)
    oov: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.values, (str, bytes)) or not isinstance(self.values, Sequence):
            raise ArgumentTypeError(
                f"Vocabulary on column '{self.column}': values must be a list of strings, "
                f"got {type(self.values).__name__}"
            )
        values = tuple(self.values)
        for v in values:
            if not isinstance(v, str):
                raise ArgumentTypeError(
                    f"Vocabulary on column '{self.column}': values must be strings, got {v!r}"
                )
        if isinstance(self.oov, bool) or not isinstance(self.oov, int):
            raise ArgumentTypeError(
                f"Vocabulary on column '{self.column}': oov must be an integer, got {self.oov!r}"
            )
        if not -(2**63) <= self.oov < 2**63:
            raise InvalidArgumentError(
                f"Vocabulary on column '{self.column}': oov must fit in int64, got {self.oov}"
            )
        object.__setattr__(self, "values", values)

    def spec(self) -> dict[str, Any]:
        blob = json.dumps(list(self.values), ensure_ascii=False).encode()
        return {"op": "Vocabulary", "column": self.column, "num_values": len(self.values),
                "values_sha256": hashlib.sha256(blob).hexdigest(), "oov": self.oov}  # fmt: skip

    def _core_spec(self) -> _core.TransformSpec:
        # Built once per transform object (a loader reuses it for every epoch
        # and worker): the table costs O(number of values).
        cached: _core.TransformSpec | None = self.__dict__.get("_core")
        if cached is None:
            cached = self._base()
            cached.n = self.oov
            try:
                cached.values = list(self.values)
            except InvalidArgumentError as e:  # a duplicate value
                raise InvalidArgumentError(f"{e} (column '{self.column}')") from None
            object.__setattr__(self, "_core", cached)
        return cached


def to_core(transforms: Sequence[Transform]) -> list[_core.TransformSpec]:
    """Checks the list's form (types are checked against the schema by the engine)."""
    out = []
    for t in transforms:
        if not isinstance(t, Transform):
            raise ArgumentTypeError(f"transforms must be shardfeed.transforms objects, got {t!r}")
        out.append(t._core_spec())
    return out


def fingerprint(transforms: Sequence[Transform]) -> str:
    """A stable digest of a transform list (for state dicts and cache keys)."""
    blob = json.dumps([t.spec() for t in transforms], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


__all__ = [
    "Bucketize",
    "Cast",
    "Clip",
    "FillNull",
    "GaussianNoise",
    "HashBucket",
    "Log1p",
    "RandomCrop",
    "RandomMask",
    "Standardize",
    "Transform",
    "Vocabulary",
    "fingerprint",
]
