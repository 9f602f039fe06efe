"""The resume state dict: built and checked in one place for Loader and TorchDataset.

A state dict is untrusted input (design invariant 8): every field is checked for
type and range when it is loaded, and each mistake is a StateDictError naming the
field, before any of it reaches the engine.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._check import UINT64, bound_text, is_bool
from ._errors import StateDictError
from ._options import Settings

STATE_VERSION = 1

_FIELDS = ("version", "epoch", "seed", "batches_consumed", "fingerprint", "settings")


def make_state(settings: Settings, fingerprint: str, epoch: int, consumed: int) -> dict[str, Any]:
    """A small JSON-serializable dict: where an epoch stands, and what it is valid for."""
    return {
        "version": STATE_VERSION,
        "epoch": epoch,
        "seed": settings.seed,
        "batches_consumed": consumed,
        "fingerprint": fingerprint,
        "settings": _plain(settings.stream_settings()),
    }


def _plain(value: Any) -> Any:
    """Settings as strict JSON holds them, and as they compare: a NaN, inf or -inf
    (a fill value, a Clip bound) as the text JSON5 writes for it (NaN never equals
    itself, and ``json.dumps(allow_nan=False)`` refuses it), tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _shown(value: Any) -> str:
    """A saved field's value for an error: its repr where that is short, else its type
    (a tampered field may be nested past the recursion limit, or huge)."""
    if isinstance(value, int) and abs(value) >= 2**128:  # repr refuses past 4300 digits
        return f"{'a negative' if value < 0 else 'an'} integer of {value.bit_length()} bits"
    if value is None or isinstance(value, (str, int, float, np.number, np.bool_)):
        text = repr(value)
        return text if len(text) <= 80 else f"{text[:77]}..."
    return f"a {type(value).__name__}"


def _int_field(state: Mapping[str, Any], name: str, lo: int, hi: int) -> int:
    value = state[name]
    try:
        if is_bool(value):
            raise TypeError
        value = operator.index(value)  # an int, or a NumPy integer
    except TypeError:
        raise StateDictError(
            f"state dict field '{name}' must be an integer, got {_shown(value)}"
        ) from None
    if not lo <= value < hi:
        raise StateDictError(
            f"state dict field '{name}' is {_shown(value)}, outside "
            f"[{bound_text(lo)}, {bound_text(hi)})"
        )
    return value


_JSON_DEPTH = 64  # far deeper than any setting; a deeper one was not made by a loader


def _check_json(value: Any, where: str, depth: int) -> None:
    """That saved settings hold what JSON does (and what a loader saves), not deeper than
    any setting: anything else would fail the comparison with a raw error."""
    if depth > _JSON_DEPTH:
        raise StateDictError(f"state dict field {where!r} is nested deeper than any setting")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise StateDictError(
                    f"state dict field {where!r} has a key {_shown(k)} (not a string)"
                )
            _check_json(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_json(v, where, depth + 1)
    elif isinstance(value, int) and abs(value) >= 2**128:
        raise StateDictError(
            f"state dict field {where!r} holds {_shown(value)}, which no setting is"
        )
    elif value is not None and not isinstance(value, (str, int, float, np.number, np.bool_)):
        raise StateDictError(
            f"state dict field {where!r} holds a {type(value).__name__}, which no setting is"
        )


def _settings_diff(state: Mapping[str, Any], settings: Settings) -> tuple[list[Any], str]:
    """The settings that differ, and them as 'name: saved x, now y' ("" when none)."""
    saved = state["settings"]
    if not isinstance(saved, Mapping):
        raise StateDictError(
            f"state dict field 'settings' must be a dict, got {type(saved).__name__}"
        )
    _check_json(saved, "settings", 0)
    ours, saved = _plain(settings.stream_settings()), _plain(saved)
    diff = sorted((k for k in set(ours) | set(saved) if ours.get(k) != saved.get(k)), key=str)
    return diff, ", ".join(f"{k}: saved {saved.get(k)!r}, now {ours.get(k)!r}" for k in diff)


def check_state(
    state: Mapping[str, Any], settings: Settings, fingerprint: str, length: int
) -> tuple[int, int]:
    """Validates a state dict against a loader; returns (epoch, batch to resume at)."""
    if not isinstance(state, Mapping):
        raise StateDictError(f"a state dict must be a dict, got {type(state).__name__}")
    missing = [k for k in _FIELDS if k not in state]
    if missing:
        names = ", ".join(map(repr, missing))
        raise StateDictError(f"not a shardfeed state dict: no field {names}")
    version = state["version"]
    if is_bool(version) or not isinstance(version, int) or version != STATE_VERSION:
        raise StateDictError(
            f"state dict field 'version' is {_shown(version)}, not {STATE_VERSION}"
        )
    saved_fingerprint = state["fingerprint"]
    if not isinstance(saved_fingerprint, str):
        kind = type(saved_fingerprint).__name__
        raise StateDictError(f"state dict field 'fingerprint' must be a string, got {kind}")
    if saved_fingerprint != fingerprint:
        if saved_fingerprint.partition("-")[0] == fingerprint.partition("-")[0]:
            # Other rows pass: the filter setting changed (said as any setting is), or
            # the files' values did (settings that follow the rows, such as the
            # default window, may differ then too).
            keys, details = _settings_diff(state, settings)
            if "filter" in keys:
                raise StateDictError(f"state dict was saved with other settings ({details})")
            raise StateDictError(
                "state dict is from this dataset when other rows passed its filter: a file's "
                f"values changed since (field 'fingerprint' {saved_fingerprint} != {fingerprint})"
            )
        raise StateDictError(
            "state dict is from another dataset (field 'fingerprint' "
            f"{saved_fingerprint} != {fingerprint})"
        )
    epoch = _int_field(state, "epoch", *UINT64)
    seed = _int_field(state, "seed", *UINT64)
    if seed != settings.seed:
        raise StateDictError(f"state dict has seed {seed}, this loader {settings.seed}")
    keys, details = _settings_diff(state, settings)
    if details:
        hint = ""
        if keys == ["rank"]:  # "rank 0 saves the checkpoint" leaves the others without theirs
            hint = "; each rank resumes from the state dict it saved itself"
        raise StateDictError(f"state dict was saved with other settings ({details}){hint}")
    consumed = _int_field(state, "batches_consumed", 0, length + 1)
    return epoch, consumed
