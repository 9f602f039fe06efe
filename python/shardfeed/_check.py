"""Type checks of user arguments, each message naming the argument (private).

Only types (and what a type implies: fits in 64 bits, not bool) are checked here;
range checks of the settings live in C++ (``PlanOptions.validate()`` and friends)
so that each mistake has one message.
"""

from __future__ import annotations

import fnmatch
import glob
import numbers
import operator
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ._errors import ArgumentTypeError, DatasetNotFoundError, InvalidArgumentError

INT64 = (-(2**63), 2**63)
UINT64 = (0, 2**64)
INT32 = (-(2**31), 2**31)


def _what(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, bounds: tuple[int, int] = INT64) -> int:
    """An integer (Python or NumPy, never bool or float) in [bounds[0], bounds[1])."""
    if is_bool(value):
        raise ArgumentTypeError(f"{name} must be an integer, got {_what(value)}")
    try:
        v = operator.index(value)  # rejects 0.5 and "4" rather than truncating them
    except TypeError:
        raise ArgumentTypeError(f"{name} must be an integer, got {_what(value)}") from None
    lo, hi = bounds
    if not lo <= v < hi:
        if bounds == INT64:  # only the type's range: the setting's own is checked later
            raise InvalidArgumentError(f"{name} {v} does not fit in a signed 64-bit integer")
        span = f"[{bound_text(lo)}, {bound_text(hi)})"
        raise InvalidArgumentError(f"{name} must be in {span}, got {v}")
    return v


def bound_text(n: int) -> str:
    """2**63 rather than 9223372036854775808 in messages."""
    k = abs(n).bit_length() - 1
    return f"{'-' if n < 0 else ''}2**{k}" if k > 8 and abs(n) == 1 << k else str(n)


def check_opt_int(name: str, value: Any, bounds: tuple[int, int] = INT64) -> int | None:
    return None if value is None else check_int(name, value, bounds)


_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30, "gib": 2**30,
    "ti": 2**40, "tib": 2**40,
    "p": 10**15, "pb": 10**15, "e": 10**18, "eb": 10**18,
    "pi": 2**50, "pib": 2**50, "ei": 2**60, "eib": 2**60,
}  # fmt: skip
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*")


def check_bytes(name: str, value: Any) -> int:
    """A byte count: an integer, or a string such as ``"512MiB"``, ``"1.5GB"``, ``"2g"``
    (decimal units k/M/G/T/P/E and binary Ki/Mi/Gi/Ti/Pi/Ei, case-insensitive; None: 0)."""
    if value is None:
        return 0
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        unit = match and _UNITS.get(match.group(2).lower())
        if not match or unit is None:
            raise InvalidArgumentError(
                f"{name} must be a byte count such as 536870912, '512MiB' or '1.5GB', got {value!r}"
            )
        count = Fraction(match.group(1)) * unit  # exact: "9007199254740993" is that many
        if 0 < count < 1:  # "0.5B" would be 0, which means no limit
            raise InvalidArgumentError(f"{name} must be at least one byte, got {value!r}")
        return check_int(name, int(count))
    return check_int(name, value)


def check_bool(name: str, value: Any) -> bool:
    if not is_bool(value):
        raise ArgumentTypeError(f"{name} must be True or False, got {_what(value)}")
    return bool(value)


def check_shuffle(value: Any) -> bool | str:
    """``shuffle``: True, False or ``"global"``."""
    if value == "global" and isinstance(value, str):
        return "global"
    if not is_bool(value):
        raise ArgumentTypeError(f"shuffle must be True, False or 'global', got {_what(value)}")
    return bool(value)


def check_opt_float(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if is_bool(value) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number or None, got {_what(value)}")
    return float(value)


FillNull = float | dict[str, float] | None


def float64_holds(value: int) -> bool:
    """Whether float64 holds the integer exactly (all up to 2**53; past it, some;
    none past float64's range)."""
    try:
        return float(value) == value
    except OverflowError:
        return False


def _fill_value(name: str, value: Any) -> float:
    """A number (bools are 1.0/0.0, for bool columns) that a double holds exactly."""
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number, got {_what(value)}")
    if isinstance(value, numbers.Integral) and not is_bool(value):
        if not float64_holds(int(value)):
            raise InvalidArgumentError(
                f"{name}: {value} has no exact float64 value (fill values are float64: "
                "integers up to 2**53 in size, and past it only those float64 holds)"
            )
    return float(value)


def check_fill_null(value: Any) -> FillNull:
    """None, a number, or ``{column: number}`` (keys sorted, so settings compare equal).

    Whether the column's type holds the value exactly is checked in C++, where
    each column's type after its transforms is known."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        out: dict[str, float] = {}
        for key in sorted(value, key=lambda k: str(k)):
            column = check_str("fill_null key", key)
            out[column] = _fill_value(f"fill_null[{column!r}]", value[key])
        return out
    # One True for every column is most likely a mistake; a bool column takes
    # True/False in the dict form, or 1/0.
    if is_bool(value):
        raise ArgumentTypeError(
            f"fill_null={value} would fill every column, numbers too: give bool columns "
            f"theirs as {{column: {value}}}, or the number {int(value)} for every column"
        )
    if not isinstance(value, numbers.Real):
        raise ArgumentTypeError(
            f"fill_null must be a number, a dict {{column: number}} or None, got {_what(value)}"
        )
    return _fill_value("fill_null", value)


def check_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {_what(value)}")
    return value


def check_names(name: str, value: Any) -> list[str]:
    """A list (or tuple, ...) of strings; a lone string is refused, not split into letters."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name} must be a list of names, got {_what(value)}")
    for item in value:
        if not isinstance(item, str):
            raise ArgumentTypeError(f"{name} must hold strings, got {_what(item)}")
    return list(value)


def check_path(name: str, value: Any) -> str:
    """A non-empty str or os.PathLike path or URI."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        # "" would mean the current folder: every Parquet file below the cwd.
        raise ArgumentTypeError(f"{name} must be a non-empty path or URI, got {_what(value)}")
    if "\0" in path:  # the system would read the path only up to it: another path
        raise InvalidArgumentError(f"{name} {path!r} holds a NUL character, which no path can")
    return path


class Sources(list[str]):
    """The paths a source names (local globs expanded), and ``bases``: the fixed
    folders of those globs (``lake`` for ``lake/y=*/k=*/*.parquet``), which the
    dataset root must contain, so that a glob's partition keys are columns
    however many values its matches have (as a folder's are).  ``globs``: per
    path, the glob it was expanded from (an id shared by that glob's matches),
    -1 for a path named: a matched folder may hold no data as long as the glob
    as a whole finds some."""

    def __init__(self, paths: list[str], bases: list[str], globs: list[int] | None = None) -> None:
        super().__init__(paths)
        self.bases = bases
        self.globs = globs if globs is not None else [-1] * len(paths)


def check_source(value: Any) -> Sources:
    if isinstance(value, Sources):  # checked already (the CLI's, handed to a Loader)
        return value
    if isinstance(value, (str, os.PathLike)):
        items = [check_path("source", value)]
    elif isinstance(value, bytes) or not isinstance(value, Sequence):
        raise ArgumentTypeError(
            f"source must be a path, a URI or a list of them, got {_what(value)}"
        )
    else:
        items = [check_path("source", s) for s in value]
    if not items:
        raise InvalidArgumentError("source is an empty list")
    paths: list[str] = []
    bases: list[str] = []
    globs: list[int] = []
    for item in items:
        expanded, base = _expand_local(item)
        globs += [len(bases) if base is not None else -1] * len(expanded)
        paths += expanded
        bases += [base] if base is not None else []
    return Sources(paths, bases, globs)


def anchored(sources: Sources) -> Sources:
    """The sources with relative local paths made absolute, from this working folder:
    what a DataLoader worker (or a later pass) reopens after an os.chdir (Hydra, job
    launchers) reads the same files.  Not normalized: ``..`` stays for the system to
    follow, through symlinks, as it did."""

    def anchor(path: str) -> str:
        # (The working folder only when asked for: it may be gone, which no absolute
        # path or URI minds.)
        return path if "://" in path or os.path.isabs(path) else os.path.join(os.getcwd(), path)

    return Sources([anchor(p) for p in sources], [anchor(b) for b in sources.bases],
                   list(sources.globs))  # fmt: skip


# scheme://authority, the path, and the query and fragment as they are.
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#]*)([^?#]*)(.*)", re.DOTALL)


# Hadoop's names for S3 (Spark and Hive tables' locations) are Arrow's s3://.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}


def _quote_uri(uri: str) -> str:
    """The URI with its path percent-encoded where a URI may not hold the character
    as it is (a space, non-ASCII letters, quotes, ...), as object keys and folders
    often do (Hive's ``city=New York``): Arrow refuses them unencoded and decodes
    them back.  Escapes already there (``%20``) and reserved characters stay.  The
    scheme is lower-cased, and Hadoop's ``s3a://`` and ``s3n://`` are ``s3://``."""
    match = _URI.fullmatch(uri)
    if match is None:
        return uri
    head, path, rest = match.groups()
    scheme, sep, authority = head.partition("://")
    scheme = scheme.lower()  # schemes are case-insensitive (RFC 3986)
    head = _SCHEME_ALIASES.get(scheme, scheme) + sep + authority
    path = re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", path)  # a '%' that starts no escape ("50% x")
    return head + urllib.parse.quote(path, safe="/%:@!$&'()*+,;=~") + rest


def _expand_local(source: str) -> tuple[list[str], str | None]:
    """A local path with ``~`` expanded; a glob pattern (``*``, ``?``, ``[``; ``**``
    for any depth) that names no existing path becomes the paths it matches, and
    its fixed folder is returned too (else None).  A URI has its path
    percent-encoded where it must be (see _quote_uri; the core expands its globs)."""
    if "://" in source:
        return [_quote_uri(source)], None
    path = os.path.expanduser(source)
    if os.path.lexists(path) or not glob.has_magic(path):
        return [path], None
    # As in a folder, a path below the pattern's fixed part with a component that
    # starts with "_" is not data (Spark's _temporary/ attempts, a Delta _delta_log/),
    # unless the pattern names that component: literally, or by a component that
    # starts with "_" itself (`_stag*`), as `.*` names hidden ones (glob skips "."
    # names already).  A dangling symlink holds nothing to read: skipped, as in a folder.
    parts = Path(path).parts
    fixed = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))
    named = set(parts[fixed:])
    underscored = [w for w in named if w.startswith("_")]

    def data(component: str) -> bool:
        return (
            not component.startswith("_")
            or component in named
            or any(fnmatch.fnmatchcase(component, w) for w in underscored)
        )

    found = sorted(glob.glob(path, recursive=True))
    shown = [m for m in found if all(data(p) for p in Path(m).parts[fixed:])]
    matches = [m for m in shown if os.path.exists(m)]
    if not matches:
        hidden = sorted(set(found) - set(shown))
        if hidden:  # `[_]x.parquet`: only names that start with "_" match
            raise DatasetNotFoundError(
                f"source {source!r} matches only paths with a component that starts with '_' "
                f"(such as {hidden[0]!r}), which are not data unless the pattern names that "
                "component literally or by a component that starts with '_' itself (`_x*`)"
            )
        raise DatasetNotFoundError(f"source {source!r} matches no file or folder")
    # The fixed folder; "." for a relative pattern that starts with one (`*/k=*/x`).
    return matches, str(Path(*parts[:fixed])) if fixed else "."


def check_stack(value: Any) -> dict[str, list[str]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"stack must be a dict {{name: [columns]}}, got {_what(value)}")
    out: dict[str, list[str]] = {}
    for key, cols in value.items():
        if not check_str("stack key", key):
            raise InvalidArgumentError("stack: a stack's name (its output key) must not be empty")
        out[key] = check_names(f"stack[{key!r}]", cols)
    return out


def check_callable(name: str, value: Any) -> Callable[..., Any] | None:
    if value is not None and not callable(value):
        raise ArgumentTypeError(f"{name} must be callable or None, got {_what(value)}")
    return value  # type: ignore[no-any-return]


def check_list(name: str, value: Any) -> list[Any]:
    """None or a list/tuple (its items are checked by whoever knows their type)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ArgumentTypeError(f"{name} must be a list, got {_what(value)}")
    return list(value)
