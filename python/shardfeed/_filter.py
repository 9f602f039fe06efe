"""filter=: parsing, checking and the canonical form of a DNF row filter (private).

The form is pyarrow.parquet's and Petastorm's: a list of ``(column, op, value)``
tuples is an AND; a list of such lists is an OR of ANDs.  Values are converted
here to what the column delivers (dates: int days since the Unix epoch;
timestamps: int in the column's unit since the epoch, UTC), so the C++ core
compares plain int64, float64, UTF-8 or bool values.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import _core
from ._errors import ArgumentTypeError, InvalidArgumentError

FilterArg = Sequence[Any]
# [[column, op, [values...]], ...] per conjunction: JSON-serializable and stable.
Canonical = list[list[list[Any]]]

_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_SET_OPS = ("in", "not in")
_EPOCH_DATE = dt.date(1970, 1, 1)
_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _kind(type_name: str) -> tuple[str, str]:
    """(kind, unit) of an Arrow type's text: int, float, str, bool, date, timestamp."""
    t = type_name
    if t.startswith("dictionary<"):
        m = re.match(r"dictionary<values=([^,]+),", t)
        t = m.group(1) if m else t
    if t in ("string", "large_string", "utf8", "large_utf8", "string_view"):
        return "str", ""
    if t == "bool":
        return "bool", ""
    if t.startswith("date32") or t.startswith("date64"):
        return "date", "ms" if t.startswith("date64") else ""
    if t.startswith("timestamp["):
        return "timestamp", t[len("timestamp[") :].split(",")[0].rstrip("]")
    if re.fullmatch(r"u?int(8|16|32|64)", t) or t.startswith(("time32", "time64", "duration")):
        return "int", ""
    if t in ("float", "double", "halffloat") or t.startswith("decimal"):
        return "float", ""
    return "other", ""


def _where(column: str, op: str) -> str:
    return f"filter on column {column!r} ({op!r})"


def _to_days(value: Any, where: str) -> int:
    if isinstance(value, dt.datetime):
        raise InvalidArgumentError(f"{where}: a date column takes dates, got {value!r}")
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, str):
        try:
            return (dt.date.fromisoformat(value) - _EPOCH_DATE).days
        except ValueError:
            raise InvalidArgumentError(f"{where}: not an ISO date: {value!r}") from None
    if isinstance(value, np.datetime64):
        return int(value.astype("datetime64[D]").astype(np.int64))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ArgumentTypeError(f"{where}: a date column takes dates, got {type(value).__name__}")


def _to_instant(value: Any, unit: str, where: str) -> int:
    per_second = _UNITS.get(unit, 1)
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(f"{where}: not an ISO timestamp: {value!r}") from None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:  # naive means UTC, as the stored instants are
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        delta = value - dt.datetime(1970, 1, 1)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return int(micros * per_second // 1_000_000)
    if isinstance(value, dt.date):
        return (value - _EPOCH_DATE).days * 86_400 * per_second
    if isinstance(value, np.datetime64):
        return int(value.astype(f"datetime64[{unit}]").astype(np.int64))
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ArgumentTypeError(
        f"{where}: a timestamp column takes datetimes or ISO strings, got {type(value).__name__}"
    )


def _value(kind: str, unit: str, value: Any, where: str) -> Any:
    if kind == "date":
        days = _to_days(value, where)
        return days * 86_400_000 if unit == "ms" else days
    if kind == "timestamp":
        return _to_instant(value, unit, where)
    if kind == "str":
        if isinstance(value, str):
            return value
        raise ArgumentTypeError(f"{where}: a string column takes strings, got {value!r}")
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ArgumentTypeError(f"{where}: a bool column takes True/False, got {value!r}")
    if kind in ("int", "float"):
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)
        ):
            raise ArgumentTypeError(f"{where}: a numeric column takes numbers, got {value!r}")
        if isinstance(value, (float, np.floating)):
            if np.isnan(value):
                raise InvalidArgumentError(f"{where}: NaN never compares true")
            return float(value)
        if not -(2**63) <= int(value) < 2**63:
            raise InvalidArgumentError(f"{where}: {value} does not fit in int64")
        return int(value)
    raise InvalidArgumentError(f"{where}: columns of this type cannot be filtered on")


def _is_predicate(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str)


def canonicalize(filter: FilterArg, schema: Sequence[tuple[str, str]]) -> Canonical:
    """The checked canonical form of ``filter`` against the dataset's (name, type) list."""
    if isinstance(filter, (str, bytes)) or not isinstance(filter, (list, tuple)) or not filter:
        raise InvalidArgumentError(
            "filter must be a non-empty list of (column, op, value) tuples or a list of such lists"
        )
    groups = [filter] if all(_is_predicate(p) for p in filter) else filter
    types = dict(schema)
    out: Canonical = []
    for group in groups:
        if not isinstance(group, (list, tuple)) or not group:
            raise InvalidArgumentError(
                f"filter: each OR term must be a non-empty list of tuples, got {group!r}"
            )
        conjunction = []
        for pred in group:
            if not _is_predicate(pred):
                raise InvalidArgumentError(
                    f"filter: expected a (column, op, value) tuple, got {pred!r}"
                )
            column, raw_op, raw = pred
            if not isinstance(raw_op, str):
                raise InvalidArgumentError(f"filter on column {column!r}: op must be a string")
            op = raw_op.strip().lower() if raw_op.strip().lower() in _SET_OPS else raw_op
            where = _where(column, op)
            if column not in types:
                raise InvalidArgumentError(f"{where}: no such column")
            kind, unit = _kind(types[column])
            if op in _SET_OPS:
                if isinstance(raw, (str, bytes)) or not isinstance(
                    raw, (list, tuple, set, frozenset, np.ndarray)
                ):
                    raise InvalidArgumentError(f"{where}: needs a list of values, got {raw!r}")
                values = sorted({_value(kind, unit, v, where) for v in raw})
                if not values:
                    # pyarrow: "in []" keeps nothing, "not in []" every non-null row.
                    raise InvalidArgumentError(f"{where}: the list of values is empty")
            elif op in _OPS:
                op = _OPS[op]
                values = [_value(kind, unit, raw, where)]
            else:
                raise InvalidArgumentError(
                    f"filter on column {column!r}: unknown operator {raw_op!r} "
                    f"(one of {sorted(set(_OPS) | set(_SET_OPS))})"
                )
            conjunction.append([column, op, values])
        out.append(conjunction)
    return out


def key(canonical: Canonical) -> str:
    """The canonical text: part of the stream settings and of cache keys."""
    return json.dumps(canonical, separators=(",", ":"), ensure_ascii=True)


def _cache_path(cache_dir: str, dataset: _core.Dataset, text: str) -> Path:
    identity = json.dumps(
        [dataset.fingerprint, text, dataset.files(), dataset.file_sizes(), dataset.root]
    )
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
        try:
            image = path.read_bytes()
        except OSError:
            image = None
    filtered = dataset.filtered(dnf, text, num_threads, image)
    if path is not None:
        fresh = filtered.filter_image()
        if fresh != image:
            _write_atomic(path, fresh)
    return filtered


def _write_atomic(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimization: a read-only folder only costs the re-read
