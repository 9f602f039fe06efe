#!/usr/bin/env python3
"""Checks that the C++ layers include only downwards.

Layers, lowest first (a layer may include its own and lower layers):
util -> storage, catalog -> cache -> plan -> transform -> tier -> exec -> bindings.

- cpp/src/<layer>/ files belong to <layer>.
- Each public header cpp/include/shardfeed/<name>.h belongs to the layer that
  implements it (PUBLIC_HEADERS); it may include only public headers, and
  only of its own or lower layers.
- bindings/ may include only public headers and its own files.
- No include cycle between files (foo.h and foo.cc count as one file).

Exits 1 with one line per violation.  Run from anywhere: paths are relative to
the repository root.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first; layers on one rank may include each other.
RANKS: list[tuple[str, ...]] = [
    ("util",),
    ("storage", "catalog"),
    ("cache",),
    ("plan",),
    ("transform",),
    ("tier",),
    ("exec",),
    ("bindings",),
]
RANK = {layer: rank for rank, layers in enumerate(RANKS) for layer in layers}

# Public header -> the layer that implements it.
PUBLIC_HEADERS = {
    "status.h": "util",
    "rng.h": "util",
    "batch.h": "util",
    "output_arena.h": "util",
    "catalog.h": "catalog",
    "filter.h": "catalog",
    # The vocabulary's table (transform/vocabulary.cc) and its builder
    # (catalog/vocabulary_builder.cc) share it: the lower of the two layers.
    "vocabulary.h": "catalog",
    "cache.h": "cache",
    "plan.h": "plan",
    "transform.h": "transform",
    "output.h": "transform",
    "decoded_tier.h": "tier",
    "engine.h": "exec",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCES = ("*.h", "*.cc")


def module_of(path: str) -> str:
    """foo.h and foo.cc are one node of the include graph."""
    return re.sub(r"\.(h|cc)$", "", path)


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.graph: dict[str, set[str]] = {}

    def layer_of_include(self, include: str) -> tuple[str | None, bool]:
        """(layer, is_public) of an include path as written."""
        if include.startswith("shardfeed/"):
            name = include.removeprefix("shardfeed/")
            return PUBLIC_HEADERS.get(name), True
        return include.split("/", 1)[0] if "/" in include else None, False

    def check_file(self, path: Path, layer: str, public: bool) -> None:
        rel = path.relative_to(ROOT).as_posix()
        if public:
            node = module_of("shardfeed/" + path.name)
        elif layer == "bindings":
            node = module_of("bindings/" + path.name)
        else:
            node = module_of(path.relative_to(ROOT / "cpp" / "src").as_posix())
        edges = self.graph.setdefault(node, set())
        for include in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if layer == "bindings" and "/" not in include:
                edges.add(module_of("bindings/" + include))  # a file of the bindings
                continue
            target, target_public = self.layer_of_include(include)
            where = f'{rel}: #include "{include}"'
            if public and not target_public:
                self.errors.append(f"{where}: a public header includes a private one")
                continue
            if layer == "bindings" and not target_public:
                self.errors.append(f"{where}: the bindings may include only cpp/include")
                continue
            if target is None or target not in RANK:
                self.errors.append(f"{where}: unknown layer (add it to check_layers.py)")
                continue
            if RANK[target] > RANK[layer]:
                self.errors.append(f"{where}: layer '{layer}' includes the higher layer '{target}'")
            edges.add(module_of(include))

    def check_cycles(self) -> None:
        state: dict[str, int] = {}  # 1: on the stack, 2: done
        stack: list[str] = []

        def visit(node: str) -> None:
            state[node] = 1
            stack.append(node)
            for nxt in sorted(self.graph.get(node, ())):
                if nxt == node:
                    continue
                if state.get(nxt) == 1:
                    cycle = [*stack[stack.index(nxt) :], nxt]
                    self.errors.append("include cycle: " + " -> ".join(cycle))
                elif nxt not in state:
                    visit(nxt)
            stack.pop()
            state[node] = 2

        for node in sorted(self.graph):
            if node not in state:
                visit(node)


def order() -> str:
    return " -> ".join("/".join(layers) for layers in RANKS)


def main() -> int:
    checker = Checker()
    for layer_dir in sorted((ROOT / "cpp" / "src").iterdir()):
        if not layer_dir.is_dir():
            continue
        if layer_dir.name not in RANK:
            checker.errors.append(
                f"cpp/src/{layer_dir.name}/: unknown layer (add it to check_layers.py)"
            )
            continue
        for pattern in SOURCES:
            for path in sorted(layer_dir.rglob(pattern)):
                checker.check_file(path, layer_dir.name, public=False)
    for path in sorted((ROOT / "cpp" / "include" / "shardfeed").glob("*.h")):
        layer = PUBLIC_HEADERS.get(path.name)
        if layer is None:
            checker.errors.append(
                f"{path.relative_to(ROOT)}: public header without a layer "
                "(add it to PUBLIC_HEADERS in check_layers.py)"
            )
            continue
        checker.check_file(path, layer, public=True)
    for pattern in SOURCES:
        for path in sorted((ROOT / "bindings").glob(pattern)):
            checker.check_file(path, "bindings", public=False)
    checker.check_cycles()
    for error in checker.errors:
        print(error, file=sys.stderr)
    if checker.errors:
        print(
            f"check_layers: {len(checker.errors)} violation(s); layers: {order()}", file=sys.stderr
        )
        return 1
    print(f"check_layers: ok ({order()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
