"""filter=: parsing, checking and the canonical form of a DNF row filter (private).

The form is pyarrow.parquet's and Petastorm's: a list of ``(column, op, value)``
tuples is an AND; a list of such lists is an OR of ANDs.  Values are converted
here to what the column delivers (dates: int days since the Unix epoch;
timestamps: int in the column's unit since the epoch, UTC), so the C++ core
compares plain int64, float64, UTF-8 or bool values.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from . import _core
from ._check import float64_holds
from ._errors import ArgumentTypeError, ColumnNotFoundError, InvalidArgumentError

FilterArg = Sequence[Any]
# [[column, op, [values...]], ...] per conjunction: JSON-serializable and stable.
Canonical = list[list[list[Any]]]

_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_SET_OPS = ("in", "not in")
_EPOCH_DATE = dt.date(1970, 1, 1)
_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


_NARROW = {"float": "float32", "halffloat": "float16"}  # Arrow's names, as NumPy says them


def _kind(type_name: str) -> tuple[str, str]:
    """(kind, unit) of an Arrow type's text: int, float, str, bool, date, timestamp,
    time (of day), duration."""
    t = type_name
    if t.startswith("dictionary<"):
        m = re.match(r"dictionary<values=([^,]+),", t)
        t = m.group(1) if m else t
    if t in ("string", "large_string", "utf8", "large_utf8", "string_view"):
        return "str", ""
    if t in ("binary", "large_binary", "binary_view"):
        return "bytes", ""
    if t == "bool":
        return "bool", ""
    if t.startswith("date32") or t.startswith("date64"):
        return "date", "ms" if t.startswith("date64") else ""
    if t.startswith("timestamp["):
        return "timestamp", t[len("timestamp[") :].split(",")[0].rstrip("]")
    if t.startswith(("time32[", "time64[", "duration[")):
        base, unit = t.rstrip("]").split("[")
        return ("duration" if base == "duration" else "time"), unit
    if re.fullmatch(r"u?int(8|16|32|64)", t):
        return "int", ""
    if t in ("float", "halffloat"):
        return "float", _NARROW[t]  # the unit names the narrow type, for its errors
    if t == "double" or t.startswith("decimal"):
        return "float", ""
    return "other", ""


def _where(column: str, op: str) -> str:
    return f"filter on column {column!r} ({op!r})"


# Seconds per numpy datetime64 unit (Y and M are turned into days first).
_NP_SECONDS = {
    "W": Fraction(604_800), "D": Fraction(86_400), "h": Fraction(3_600), "m": Fraction(60),
    "s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6),
    "ns": Fraction(1, 10**9), "ps": Fraction(1, 10**12), "fs": Fraction(1, 10**15),
    "as": Fraction(1, 10**18),
}  # fmt: skip
# "...HH:MM:SS.fraction<rest>": the fraction is read here, to the last digit
# (datetime keeps microseconds only).
_ISO_FRACTION = re.compile(r"(.*\d{2}:\d{2}:\d{2})[.,](\d+)(.*)")


def _datetime64_seconds(value: np.datetime64, where: str) -> Fraction:
    """The exact instant of a datetime64 in seconds since the epoch."""
    if np.isnat(value):
        raise InvalidArgumentError(
            f"{where}: NaT is not a filter value (it equals nothing: ==/in would keep no "
            "row, !=/not in every row)"
        )
    unit, count = np.datetime_data(value.dtype)
    if unit in ("Y", "M", "generic"):
        value, unit, count = value.astype("datetime64[D]"), "D", 1
    return int(value.astype(np.int64)) * count * _NP_SECONDS[unit]


def _datetime_seconds(value: dt.datetime) -> Fraction:
    if value.tzinfo is not None:  # naive means UTC, as the stored instants are
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = value - dt.datetime(1970, 1, 1)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return Fraction(micros, 1_000_000)


def _to_days(value: Any, where: str) -> Fraction:
    """Days since the epoch, exactly (a datetime64 with a time of day is a fraction)."""
    if isinstance(value, dt.datetime):  # an instant (naive: UTC), its time of day kept
        return _datetime_seconds(value) / 86_400
    if isinstance(value, dt.date):
        return Fraction((value - _EPOCH_DATE).days)
    if isinstance(value, str):
        try:
            return Fraction((dt.date.fromisoformat(value) - _EPOCH_DATE).days)
        except ValueError:
            raise InvalidArgumentError(f"{where}: not an ISO date: {value!r}") from None
    if isinstance(value, np.datetime64):
        return _datetime64_seconds(value, where) / 86_400
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Fraction(int(value))
    raise ArgumentTypeError(f"{where}: a date column takes dates, got {type(value).__name__}")


def _to_instant(value: Any, unit: str, where: str) -> Fraction:
    """The instant in the column's unit since the epoch, exactly: a value finer than
    the unit is a fraction, which the comparison then rounds the right way."""
    per_second = _UNITS.get(unit, 1)
    if isinstance(value, str):
        m = _ISO_FRACTION.fullmatch(value.strip())
        try:
            if m:
                seconds = _datetime_seconds(dt.datetime.fromisoformat(m[1] + m[3]))
                return (seconds + Fraction(int(m[2]), 10 ** len(m[2]))) * per_second
            return _datetime_seconds(dt.datetime.fromisoformat(value)) * per_second
        except ValueError:
            raise InvalidArgumentError(f"{where}: not an ISO timestamp: {value!r}") from None
    if isinstance(value, dt.datetime):
        return _datetime_seconds(value) * per_second
    if isinstance(value, dt.date):
        return Fraction((value - _EPOCH_DATE).days * 86_400 * per_second)
    if isinstance(value, np.datetime64):
        return _datetime64_seconds(value, where) * per_second
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return Fraction(int(value))
    raise ArgumentTypeError(
        f"{where}: a timestamp column takes datetimes or ISO strings, got {type(value).__name__}"
    )


def _seconds_of(value: dt.timedelta) -> Fraction:
    return Fraction((value.days * 86_400 + value.seconds) * 10**6 + value.microseconds, 10**6)


def _since_midnight(t: dt.time) -> Fraction:
    """Seconds since midnight of a time of day, to its microsecond."""
    return Fraction(t.hour * 3600 + t.minute * 60 + t.second) + Fraction(t.microsecond, 10**6)


def _to_count(kind: str, unit: str, value: Any, where: str) -> Any:
    """A time of day (``datetime.time`` or an ISO string) or a duration
    (``datetime.timedelta``, ``numpy.timedelta64``, pandas' Timedelta) as the exact
    count of the column's unit; an integer stays the count it is."""
    per_second = _UNITS[unit]
    if kind == "time":
        if isinstance(value, str):
            try:
                return _time_of(value) * per_second
            except ValueError:
                raise InvalidArgumentError(
                    f"{where}: not an ISO time of day without a zone: {value!r}"
                ) from None
        if isinstance(value, dt.time):
            if value.tzinfo is not None:
                raise InvalidArgumentError(
                    f"{where}: a time column holds times of day without a zone, got {value!r}"
                )
            return _since_midnight(value) * per_second
        what = f"datetime.time, ISO strings or integer counts of {unit}"
    else:
        to_numpy = getattr(value, "to_timedelta64", None)  # pandas' Timedelta keeps its ns
        if callable(to_numpy) and isinstance(value, dt.timedelta):
            value = to_numpy()
        if isinstance(value, np.timedelta64):
            if np.isnat(value):
                raise InvalidArgumentError(f"{where}: NaT is not a filter value")
            np_unit, count = np.datetime_data(value.dtype)
            if np_unit not in _NP_SECONDS:  # years and months have no fixed length
                raise InvalidArgumentError(
                    f"{where}: a timedelta64 in {np_unit!r} has no fixed length in seconds"
                )
            return value.astype(np.int64).item() * count * _NP_SECONDS[np_unit] * per_second
        if isinstance(value, dt.timedelta):
            return _seconds_of(value) * per_second
        what = f"datetime.timedelta, numpy.timedelta64 or integer counts of {unit}"
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    ):
        return _value("int", "", value, where)
    raise ArgumentTypeError(f"{where}: a {kind} column takes {what}, got {value!r}")


def _time_of(text: str) -> Fraction:
    """Seconds since midnight of an ISO time of day, its fraction read to the last
    digit (``datetime.time`` keeps microseconds only)."""
    text = text.strip()
    m = _ISO_FRACTION.fullmatch(text)
    head, digits, rest = m.groups() if m else (text, "", "")
    t = dt.time.fromisoformat(head + rest)
    if t.tzinfo is not None:
        raise ValueError(text)
    # (The fraction was taken off the text: t has no microseconds.)
    return _since_midnight(t) + (Fraction(int(digits), 10 ** len(digits)) if digits else 0)


def _value(kind: str, unit: str, value: Any, where: str) -> Any:
    """The value in the column's delivered representation: exact (a Fraction) for
    integer, date and timestamp columns given integral or temporal values."""
    if kind in ("date", "timestamp"):
        # pandas' Timestamp (and NaT) is a datetime that also holds nanoseconds: as
        # the numpy instant it stands for (UTC), which keeps them.
        to_numpy = getattr(value, "to_datetime64", None)
        if callable(to_numpy) and isinstance(value, dt.datetime):
            value = to_numpy()
    if kind == "date":
        days = _to_days(value, where)
        return days * 86_400_000 if unit == "ms" else days
    if kind == "timestamp":
        return _to_instant(value, unit, where)
    if kind in ("time", "duration"):
        return _to_count(kind, unit, value, where)
    if kind == "bytes" and isinstance(value, (bytes, bytearray)):
        # A binary column (text some writers store without the UTF8 annotation, a
        # partition key with a value that is not text) compares bytes; its values
        # travel as text: bytes that are UTF-8.
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(
                f"{where}: {bytes(value)!r} is not UTF-8; a binary column is filtered by "
                "text values (str, or bytes that are UTF-8)"
            ) from None
    if kind in ("str", "bytes"):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgumentError(
                    f"{where}: {value!r} is not Unicode text (a lone surrogate)"
                ) from None
            return value
        if kind == "bytes":
            raise ArgumentTypeError(
                f"{where}: a binary column takes text (str, or bytes that are UTF-8), got {value!r}"
            )
        raise ArgumentTypeError(f"{where}: a string column takes strings, got {value!r}")
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ArgumentTypeError(f"{where}: a bool column takes True/False, got {value!r}")
    if kind == "float" and isinstance(value, decimal.Decimal):
        # A decimal column is delivered as the nearest float64 of each value: a
        # Decimal bound is compared as its own nearest float64, as the rows are.
        if value.is_nan():
            raise InvalidArgumentError(f"{where}: NaN is not a filter value")
        return float(value)
    if kind in ("int", "float"):
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise ArgumentTypeError(f"{where}: a numeric column takes numbers, got {value!r}")
        if isinstance(value, (float, np.floating)):
            if np.isnan(value):
                raise InvalidArgumentError(
                    f"{where}: NaN is not a filter value (it equals nothing: ==/in would "
                    "keep no row, !=/not in every row); to drop NaN rows keep a range, "
                    "e.g. (column, '>=', float('-inf'))"
                )
            if kind == "int":  # exactly: x >= 1.5 is x >= 2 (no float64 rounding of x)
                if np.isinf(value):
                    return Fraction(2**65 if value > 0 else -(2**65))  # past any integer column
                return Fraction(float(value))
            return float(value)
        if kind == "float":
            # Compared as float64, it would match its float64 neighbour.
            if not float64_holds(int(value)) and unit:  # none has a float32 (float16) value
                raise InvalidArgumentError(
                    f"{where}: {int(value)} has no exact {unit} value (the column's type); "
                    "pass float(value) to compare with the nearest one"
                )
            if not float64_holds(int(value)):
                raise InvalidArgumentError(
                    f"{where}: {int(value)} has no exact float64 value, and the column's values "
                    "are float64 (pass float(value) to compare with the nearest one)"
                )
            if not -(2**63) <= int(value) < 2**63:
                return float(value)
        return Fraction(int(value)) if kind == "int" else int(value)
    raise InvalidArgumentError(f"{where}: columns of this type cannot be filtered on")


_ALL, _NONE, _NOT_NULL = "all", "none", "not null"


def _integral(op: str, values: list[Fraction], lo: int, hi: int) -> tuple[str, list[int]] | str:
    """A comparison of a column of integers in [lo, hi] with exact values, as one on
    integers in that range: (op, values), or _ALL (every row passes, nulls too),
    _NONE (no row) or _NOT_NULL (every non-null row)."""
    if op in _SET_OPS:
        ints = (v.numerator for v in values if v.denominator == 1)
        kept = sorted({n for n in ints if lo <= n <= hi})
        return (op, kept) if kept else (_NONE if op == "in" else _ALL)
    (v,) = values
    exact = v.denominator == 1 and lo <= v <= hi
    if op == "==":
        return ("==", [int(v)]) if exact else _NONE
    if op == "!=":
        return ("!=", [int(v)]) if exact else _NOT_NULL
    # x < v  <=>  x < ceil(v);  x >= v  <=>  x >= ceil(v);  x <= v, x > v: floor(v).
    c = math.ceil(v) if op in ("<", ">=") else math.floor(v)
    if op == "<":
        return _NONE if c <= lo else _NOT_NULL if c > hi else ("<", [c])
    if op == "<=":
        return _NONE if c < lo else _NOT_NULL if c >= hi else ("<=", [c])
    if op == ">":
        return _NONE if c >= hi else _NOT_NULL if c < lo else (">", [c])
    return _NONE if c > hi else _NOT_NULL if c <= lo else (">=", [c])  # ">="


def _distinct(v: Any) -> Any:
    """What tells two filter values apart: the value, and a float zero's sign."""
    return (v, math.copysign(1.0, v)) if isinstance(v, float) and v == 0 else v


def _order(v: Any) -> Any:
    """Sort key of filter values: -0.0 before 0.0 (a set's one canonical order).  An
    integral Fraction sorts as its int: comparing Fractions is 20x slower."""
    if isinstance(v, Fraction) and v.denominator == 1:
        v = v.numerator
    return (v, math.copysign(1.0, v) if isinstance(v, float) else 1.0)


def _plain(v: Any) -> Any:
    if not isinstance(v, Fraction):
        return v
    return int(v) if v.denominator == 1 and -(2**63) <= v < 2**63 else float(v)


def _predicate(column: str, type_name: str, op: str, values: list[Any]) -> list[Any] | None:
    """The canonical predicate; None where every row passes (it is left out of its AND)."""
    narrow = {"float": np.float32, "halffloat": np.float16}.get(type_name)
    if narrow is not None and op in _SET_OPS:
        # in / not in on a float32 (float16) column: each value as the column's own
        # type holds it, as pyarrow's is_in casts its value set (0.1 is float32's 0.1,
        # which == 0.1 compares in float64 and misses).  An integer it cannot hold
        # exactly is refused, as pyarrow refuses it (16777217 is no float32).
        rounded: dict[Any, float] = {}
        for v in values:
            with np.errstate(over="ignore"):
                r = float(narrow(_plain(v)))
            if not isinstance(v, float) and r != v:  # an integer (int or Fraction)
                raise InvalidArgumentError(
                    f"{_where(column, op)}: {_plain(v)} has no exact {_NARROW[type_name]} value "
                    "(the column's type); pass float(value) to compare with the nearest one"
                )
            rounded[_distinct(r)] = r
        return [column, op, sorted(rounded.values(), key=_order)]
    if not all(isinstance(v, Fraction) for v in values):
        # Floats among them: compared as float64 (integral ones as int64 where they fit).
        return [column, op, [_plain(v) for v in values]]
    unsigned = type_name == "uint64"
    lo, hi = (0, 2**64 - 1) if unsigned else (-(2**63), 2**63 - 1)
    out = _integral(op, values, lo, hi)
    if isinstance(out, tuple):
        op, ints = out
    elif out == _ALL:
        return None
    elif out == _NONE:  # below the range: never true, nulls included
        op, ints = "<", [lo]
    else:  # _NOT_NULL
        op, ints = ">=", [lo]
    # A uint64 column's values travel as the int64 of the same bits (filter.h).
    return [column, op, [i - 2**64 if unsigned and i >= 2**63 else i for i in ints]]


def _is_predicate(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str)


def _looks_like_predicate(item: Any) -> bool:
    """A tuple or list that starts with a column name: meant as a predicate."""
    return isinstance(item, (tuple, list)) and bool(item) and isinstance(item[0], str)


def _form(item: Any) -> str:
    """What a malformed predicate is, for its error: a tuple of the wrong length says so."""
    if isinstance(item, (tuple, list)) and len(item) != 3:
        return f"{item!r} ({len(item)} items)"
    return repr(item)


def check_form(filter: FilterArg) -> list[list[tuple[str, str, Any]]]:
    """The filter's OR terms of (column, op, value), its form checked without the
    schema (so that a malformed filter is named before anything is opened): ops
    known and spelled canonically, set ops given a non-empty list of values."""
    if isinstance(filter, (str, bytes)) or not isinstance(filter, (list, tuple)):
        raise ArgumentTypeError(
            "filter must be a non-empty list of (column, op, value) tuples or a list of such "
            f"lists, got {type(filter).__name__} {filter!r}"
        )
    if not filter:
        raise InvalidArgumentError(
            "filter must be a non-empty list of (column, op, value) tuples or a list of such lists"
        )
    if _is_predicate(filter):
        # ("x", "==", 1) alone: its items would be taken for OR terms.
        raise InvalidArgumentError(
            f"filter must be a list of (column, op, value) tuples: [{filter!r}], not {filter!r}"
        )
    if isinstance(filter[0], str):  # ("x", "=="): one malformed predicate
        raise InvalidArgumentError(
            f"filter must be a list of (column, op, value) tuples, got {_form(filter)}"
        )
    groups: Sequence[Any] = filter
    if all(_is_predicate(p) for p in filter):
        groups = [filter]
    elif any(_looks_like_predicate(p) for p in filter):
        # One AND of predicates, one of them malformed: name that one.
        bad = next(p for p in filter if not _is_predicate(p))
        bare = next((p for p in filter if _is_predicate(p)), None)
        group = isinstance(bad, (list, tuple)) and bool(bad) and all(map(_is_predicate, bad))
        if bare is not None and group:
            raise InvalidArgumentError(
                f"filter mixes OR terms (lists of tuples) with a bare tuple {bare!r}: put it "
                "in a list of its own (an OR term), or in an OR term's list (an AND)"
            )
        raise InvalidArgumentError(
            f"filter: expected a (column, op, value) tuple, got {_form(bad)}"
        )
    out: list[list[tuple[str, str, Any]]] = []
    for group in groups:
        if not isinstance(group, (list, tuple)) or not group:
            raise InvalidArgumentError(
                f"filter: each OR term must be a non-empty list of tuples, got {group!r}"
            )
        if isinstance(group[0], str):  # [("x", "==")]: a predicate, malformed
            raise InvalidArgumentError(
                f"filter: expected a (column, op, value) tuple, got {_form(group)}"
            )
        conjunction: list[tuple[str, str, Any]] = []
        for pred in group:
            if not _is_predicate(pred):
                raise InvalidArgumentError(
                    f"filter: expected a (column, op, value) tuple, got {_form(pred)}"
                )
            column, raw_op, raw = pred
            if not isinstance(raw_op, str):
                raise ArgumentTypeError(f"filter on column {column!r}: op must be a string")
            op = raw_op.strip().lower() if raw_op.strip().lower() in _SET_OPS else raw_op
            where = _where(column, op)
            if op in _SET_OPS:
                if isinstance(raw, (str, bytes)) or not isinstance(
                    raw, (list, tuple, set, frozenset, np.ndarray)
                ):
                    raise InvalidArgumentError(f"{where}: needs a list of values, got {raw!r}")
                if len(raw) == 0:
                    # pyarrow: "in []" keeps nothing, "not in []" every non-null row.
                    raise InvalidArgumentError(f"{where}: the list of values is empty")
            elif op in _OPS:
                op = _OPS[op]
            else:
                raise InvalidArgumentError(
                    f"filter on column {column!r}: unknown operator {raw_op!r} "
                    f"(one of {sorted(set(_OPS) | set(_SET_OPS))})"
                )
            conjunction.append((column, op, raw))
        out.append(conjunction)
    return out


def _no_column(where: str, column: str, names: list[str]) -> ColumnNotFoundError:
    """The error for a column the dataset lacks, as ``columns=`` says it: a struct's
    fields named, else the dataset's first columns."""
    fields = [n for n in names if n.startswith(f"{column}.")]
    if fields:
        shown = ", ".join(map(repr, fields[:8])) + (", ..." if len(fields) > 8 else "")
        return ColumnNotFoundError(
            f"{where}: {column!r} is a struct, a list of structs or a map, whose fields are "
            f"columns of their own, named by their path: {shown}"
        )
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return ColumnNotFoundError(f"{where}: no such column in the dataset (columns: {shown})")


def canonicalize(filter: FilterArg, schema: Sequence[tuple[str, str]]) -> Canonical:
    """The checked canonical form of ``filter`` against the dataset's (name, type) list."""
    types = dict(schema)
    out: Canonical = []
    for group in check_form(filter):
        conjunction = []
        for column, op, raw in group:
            where = _where(column, op)
            if column not in types:
                raise _no_column(where, column, list(types))
            kind, unit = _kind(types[column])
            if kind == "other":
                raise InvalidArgumentError(
                    f"{where}: columns of type {types[column]} cannot be filtered on (numbers, "
                    "bools, text, binary, dates, times, timestamps, durations and decimals can)"
                )
            if op in _SET_OPS:
                # Once each; -0.0 and 0.0 both, as a set would keep only one of them
                # (and Arrow's set lookup tells them apart).
                distinct = {_distinct(x): x for x in (_value(kind, unit, v, where) for v in raw)}
                values = sorted(distinct.values(), key=_order)
            else:
                values = [_value(kind, unit, raw, where)]
            predicate = _predicate(column, types[column], op, values)
            if predicate is not None:
                conjunction.append(predicate)
        out.append(conjunction)  # empty: every row passes
    return out


def key(canonical: Canonical) -> str:
    """The canonical text: part of the stream settings and of cache keys."""
    return json.dumps(canonical, separators=(",", ":"), ensure_ascii=True)


def _cache_path(cache_dir: str, dataset: _core.Dataset, text: str) -> Path:
    # v2: files' values compared as delivered (units, decimals); v3: a float row
    # group whose statistics are one value may hold a NaN that passes != and not in;
    # v4: a duration's statistics in its file's unit (a column promoted across units).
    # Each file's version (modification time; locally also device, inode and change
    # time): a file rewritten at its size, with the same row groups, is another file.
    identity = json.dumps(
        ["v4", dataset.fingerprint, text, dataset.files(), dataset.file_sizes(),
         list(dataset.file_versions()), dataset.root]
    )  # fmt: skip
    digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return Path(cache_dir) / "filters" / f"{digest}.bin"


def apply(
    dataset: _core.Dataset,
    canonical: Canonical,
    num_threads: int,
    cache_dir: str | None,
    image: bytes | None = None,
) -> _core.Dataset:
    """The dataset restricted to the passing rows; with ``cache_dir`` the result is
    kept in ``filters/`` there (a damaged or stale file is ignored and rewritten)."""
    text = key(canonical)
    dnf = [[(c, op, list(v)) for c, op, v in group] for group in canonical]
    path = None if cache_dir is None else _cache_path(cache_dir, dataset, text)
    if image is None and path is not None:
        image = _read_image(path)
    filtered = dataset.filtered(dnf, text, num_threads, image)
    if path is not None:
        fresh = filtered.filter_image()
        if fresh != image:
            _write_atomic(path, fresh)
    return filtered


def _read_image(path: Path) -> bytes | None:
    """The cached image, or None: not blocking, and only from a regular file (a FIFO
    in its place would wait for a writer, beyond Ctrl-C)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = None
    try:
        # Every folder made here is 0700, as the caches make theirs (cache_dir too,
        # when the filter cache is the first to need it).
        for folder in reversed([path.parent, *path.parent.parents]):
            if not folder.exists():
                folder.mkdir(mode=0o700, exist_ok=True)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            # Damage (a folder, FIFO or link where the image belongs): replaced.
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass  # the cache is an optimization: a read-only folder only costs the re-read
    finally:
        if tmp is not None:  # a full disk: no temporary left behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
