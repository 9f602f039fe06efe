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

**Stacks.** ``Standardize``, ``Clip``, ``Log1p``, ``FillNull``, ``GaussianNoise``,
``RandomMask`` (and ``Cast``, ``HashBucket``, ``Bucketize``) also take the name of a
``stack`` instead of a column, with one setting for every feature or a list (or 1-D
array) of F settings, one per feature in the stack's column order::

    stack = {"x": features}                       # F columns -> x: [B, F]
    transforms = [
        FillNull("x", value=0.0),                 # first among the stack's transforms
        Standardize("x", mean=means, std=stds),   # length-F lists or arrays
        GaussianNoise("x", std=0.05),
    ]

A stack's transforms run on its row-major ``[rows, F]`` matrix, after its columns' own
transforms (whatever their places in the list), in list order; ``FillNull`` on a stack
fills its columns' nulls as the matrix is built, so it must come first among them.  A
random one draws all F values of a sample from the sample's one stream, keyed as
below.  Per-feature lists are for stacks only.

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
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from . import _core
from ._check import check_int, float64_holds
from ._errors import ArgumentTypeError, InvalidArgumentError

_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float32", "float64")  # fmt: skip


Setting = float | Sequence[float]  # one value, or one per feature of a stack


def _exact(op: str, column: str, name: str, value: Any) -> None:
    """Settings travel as float64: an integer that float64 cannot hold (beyond 2**53)
    would silently become its neighbour (a Clip bound or FillNull value of an int64
    column off by one), so it is refused."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        v = int(value)
        if not float64_holds(v):
            raise InvalidArgumentError(
                f"{op} on '{column}': {name} {v} is an integer that float64 cannot "
                f"hold exactly (settings are float64; integers up to 2**53 are exact)"
            )


_NOT_BOOL = ("mean", "std", "probability")  # settings a bool is never meant as


def _per_feature(op: str, column: str, name: str, value: Any, none: float | None = None) -> Any:
    """A setting as given (a number, or None where ``none`` stands for an open bound),
    or a list or 1-D array of them as a tuple of floats (and Nones)."""
    if value is None and none is not None:
        return None
    if isinstance(value, (bool, np.bool_)) and name in _NOT_BOOL:
        # A fill or mask value, or a Clip bound, may be a bool (for a bool column);
        # True as a std is a mistake.
        raise ArgumentTypeError(f"{op} on '{column}': {name} must be a number, got {value!r}")
    if isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"{op} on '{column}': {name} must be a number or a list of numbers in the stack's "
            f"feature order, not a dict"
        )
    _exact(op, column, name, value)
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, numbers.Real) or getattr(value, "ndim", None) == 0:
        return float(value)  # a numpy scalar or 0-d array: a plain float in spec()
    if getattr(value, "ndim", 1) != 1:
        raise InvalidArgumentError(
            f"{op} on '{column}': {name} must be a number or a 1-D list (one per feature "
            f"of a stack), got shape {value.shape}"
        )
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"{op} on '{column}': {name} must be a number or a list of "
                                f"numbers (one per feature of a stack), got {value!r}")  # fmt: skip
    out: list[float | None] = []
    for v in value:
        if v is None and none is not None:
            out.append(None)  # an open bound; spec() keeps it JSON's null
            continue
        if isinstance(v, (bool, np.bool_)) and name in _NOT_BOOL:
            raise ArgumentTypeError(f"{op} on '{column}': {name} must hold numbers, got {v!r}")
        _exact(op, column, name, v)
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise ArgumentTypeError(
                f"{op} on '{column}': {name} must hold numbers, got {v!r}"
            ) from None
    if not out:
        raise InvalidArgumentError(f"{op} on '{column}': {name} is an empty list")
    return tuple(out)


def _split(value: Any, none: float = 0.0) -> tuple[float, list[float]]:
    """(scalar, per-feature list) for the core spec."""
    if isinstance(value, tuple):
        return 0.0, [none if v is None else v for v in value]
    return (none if value is None else float(value)), []


@dataclass(frozen=True)
class Transform:
    """Base class: one operation on one column (or one stack)."""

    column: str
    random: ClassVar[bool] = False
    # Settings that take a list, one value per feature of a stack.
    _vectors: ClassVar[tuple[str, ...]] = ()
    # Settings where None means an open bound (Clip), and what it stands for.
    _open: ClassVar[dict[str, float]] = {}

    def __post_init__(self) -> None:
        for name in self._vectors:
            value = _per_feature(type(self).__name__, self.column, name, getattr(self, name),
                                 self._open.get(name))  # fmt: skip
            object.__setattr__(self, name, value)

    def spec(self) -> dict[str, Any]:
        """Plain data: the transform's name and settings (stable, JSON-serializable;
        per-feature settings as lists, as JSON gives them back)."""
        fields = asdict(self)
        for name, value in fields.items():
            if isinstance(value, tuple):
                fields[name] = list(value)
            elif isinstance(value, np.generic):  # np.int64(7) given for an int setting
                fields[name] = value.item()
        return {"op": type(self).__name__, **fields}

    def _core_spec(self) -> _core.TransformSpec:
        raise NotImplementedError

    def _base(self) -> _core.TransformSpec:
        if not isinstance(self.column, str):
            raise ArgumentTypeError(
                f"{type(self).__name__}: column must be a column or stack name, got "
                f"{type(self.column).__name__} {self.column!r}"
            )
        if not self.column:
            raise InvalidArgumentError(f"{type(self).__name__}: column must be a non-empty name")
        t = _core.TransformSpec()
        t.op = type(self).__name__
        t.column = self.column
        return t


@dataclass(frozen=True)
class Cast(Transform):
    """Converts to ``dtype`` (a numpy name: "float32", "int64", "bool", ...).

    To an integer dtype, a value outside its range becomes the nearest bound (300 as
    "int8" is 127, as 1e10 is), a float is truncated toward zero and NaN becomes 0; to
    "bool", any value but 0 is True."""

    dtype: str = "float32"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.dtype, np.dtype) or (
            isinstance(self.dtype, type) and issubclass(self.dtype, np.generic)
        ):
            object.__setattr__(self, "dtype", np.dtype(self.dtype).name)  # np.int8 as "int8"

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

    value: Setting = 0.0
    _vectors: ClassVar[tuple[str, ...]] = ("value",)

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.a_values = _split(self.value)
        return t


@dataclass(frozen=True)
class Clip(Transform):
    """Clamps to [min, max]; ``None`` leaves that side open (also inside a list)."""

    min: Setting | None = None
    max: Setting | None = None
    _vectors: ClassVar[tuple[str, ...]] = ("min", "max")
    _open: ClassVar[dict[str, float]] = {"min": -math.inf, "max": math.inf}

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.a_values = _split(self.min, -math.inf)
        t.b, t.b_values = _split(self.max, math.inf)
        return t


@dataclass(frozen=True)
class Standardize(Transform):
    """``(x - mean) / std``; std must be > 0."""

    mean: Setting = 0.0
    std: Setting = 1.0
    _vectors: ClassVar[tuple[str, ...]] = ("mean", "std")

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.a_values = _split(self.mean)
        t.b, t.b_values = _split(self.std)
        return t


@dataclass(frozen=True)
class Log1p(Transform):
    """``log(1 + x)``."""

    def _core_spec(self) -> _core.TransformSpec:
        return self._base()


@dataclass(frozen=True)
class HashBucket(Transform):
    """Integer or string ids to a bucket index in [0, num_buckets).

    Strings (and binary or fixed_size_binary ids such as UUIDs) are hashed by
    their bytes (FNV-1a 64), integers by splitmix64; lists of either are mapped
    element by element.
    """

    num_buckets: int = 1

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.n = check_int(
            f"HashBucket on column {self.column!r}: num_buckets", self.num_buckets, (1, 2**63)
        )
        return t


@dataclass(frozen=True)
class Bucketize(Transform):
    """Index of the bucket: how many boundaries are <= x (strictly increasing boundaries);
    NaN goes to the last bucket, ``len(boundaries)``, as with ``numpy.digitize``."""

    boundaries: Sequence[float] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._floats()  # checked as Clip's bounds are: when made

    def spec(self) -> dict[str, Any]:
        return {"op": "Bucketize", "column": self.column, "boundaries": self._floats()}

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.boundaries = self._floats()
        return t

    def _floats(self) -> list[float]:
        where = f"Bucketize on column {self.column!r}: boundaries"
        given = self.boundaries
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence | np.ndarray):
            raise ArgumentTypeError(f"{where} must be a list of numbers, got {given!r}")
        out: list[float] = []
        for b in given:
            if isinstance(b, (bool, np.bool_)) or not isinstance(b, numbers.Real):
                raise ArgumentTypeError(f"{where} must be numbers, got {b!r}")
            _exact("Bucketize", self.column, "boundary", b)
            out.append(float(b))
        return out


@dataclass(frozen=True)
class GaussianNoise(Transform):
    """Adds N(0, std^2) noise, drawn per sample and element."""

    std: Setting = 1.0
    random: ClassVar[bool] = True
    _vectors: ClassVar[tuple[str, ...]] = ("std",)

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.a_values = _split(self.std)
        return t


@dataclass(frozen=True)
class RandomMask(Transform):
    """Replaces each element with ``value`` with the given probability."""

    probability: Setting = 0.1
    value: Setting = 0.0
    random: ClassVar[bool] = True
    _vectors: ClassVar[tuple[str, ...]] = ("probability", "value")

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.a, t.a_values = _split(self.probability)
        t.b, t.b_values = _split(self.value)
        return t


@dataclass(frozen=True)
class RandomCrop(Transform):
    """Crops each variable-length list to at most ``length`` elements at a random offset."""

    length: int = 1
    random: ClassVar[bool] = True

    def _core_spec(self) -> _core.TransformSpec:
        t = self._base()
        t.n = check_int(
            f"{type(self).__name__} on column {self.column!r}: length", self.length, (1, 2**63)
        )
        return t


@dataclass(frozen=True)
class Vocabulary(Transform):
    """Strings to int64 indices: ``values[k]`` becomes ``k + 1``; a value not in
    the list, and a null, becomes ``oov`` (so a null never raises here).

    Exact: bytes are compared after a hash probe, so two strings never share an
    index.  A value may be ``bytes`` (a UUID's 16 bytes for a fixed_size_binary
    column); a ``str`` stands for its UTF-8 bytes.  Takes string, large_string,
    string_view, binary and dictionary<string> columns (pandas and polars
    categoricals), and lists of them (element by element: a null element is
    ``oov``), as the column's first transform.
    Build ``values`` with ``shardfeed.vocabulary(source, column)``.

    The lookup table is built once, in C++, when the transform is first used.
    In ``spec()`` (and so in a state dict) the values appear as their number
    and a SHA-256 digest of the list, not the list itself, so that a vocabulary
    of millions of ids keeps state dicts small.
    """

    values: Sequence[str | bytes] = field(default_factory=tuple)
    oov: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.values, (str, bytes)) or not isinstance(self.values, Sequence):
            raise ArgumentTypeError(
                f"Vocabulary on column '{self.column}': values must be a list of strings, "
                f"got {type(self.values).__name__}"
            )
        values = tuple(self.values)
        if not values:
            raise InvalidArgumentError(
                f"Vocabulary on column '{self.column}': values is empty, so every row would "
                f"be oov (a vocabulary(..., min_count=...) that kept no value?)"
            )
        for at, v in enumerate(values):
            if not isinstance(v, (str, bytes)):
                raise ArgumentTypeError(
                    f"Vocabulary on column '{self.column}': values must be strings (or bytes, "
                    f"for binary ids), got {v!r}"
                )
            if isinstance(v, str):
                try:
                    v.encode()
                except UnicodeEncodeError as e:  # a lone surrogate: no UTF-8 spells it
                    raise InvalidArgumentError(
                        f"Vocabulary on column '{self.column}': value {at} ({v!r}) is not "
                        f"valid Unicode text, so no UTF-8 string equals it ({e.reason})"
                    ) from None
        if isinstance(self.oov, (bool, np.bool_)) or not isinstance(self.oov, numbers.Integral):
            raise ArgumentTypeError(
                f"Vocabulary on column '{self.column}': oov must be an integer, got {self.oov!r}"
            )
        object.__setattr__(self, "oov", int(self.oov))  # np.int64(0) too, as plain JSON
        if not -(2**63) <= self.oov < 2**63:
            raise InvalidArgumentError(
                f"Vocabulary on column '{self.column}': oov must fit in int64, got {self.oov}"
            )
        object.__setattr__(self, "values", values)

    def spec(self) -> dict[str, Any]:
        # Strings as themselves (the digest earlier versions gave), bytes as hex.
        shown = [v if isinstance(v, str) else {"hex": v.hex()} for v in self.values]
        blob = json.dumps(shown, ensure_ascii=False).encode()
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
                cached.values = [v.encode() if isinstance(v, str) else v for v in self.values]
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
