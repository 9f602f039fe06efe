#!/usr/bin/env bash
# Creates .venv (or $SHARDFEED_VENV) with everything shardfeed needs, and builds
# and installs shardfeed into it.  Safe to run again: it only redoes what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${SHARDFEED_VENV:-.venv}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"

# torch is pinned to the CPU build this project is developed and tested with.
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0" "pyarrow>=26,<27" "numpy>=1.24" \
  "nanobind==2.12.0" "scikit-build-core>=0.10" cmake ninja \
  "pytest>=8" "hypothesis>=6.100" "ruff>=0.6" "mypy>=1.10" \
  "moto[server]>=5" boto3 "xxhash>=3"
# Writers of test data only (pandas and polars categoricals, as users have them;
# DuckDB's partitioned COPY in tests/test_lake.py; Delta Lake tables and their
# reference reader in tests/test_delta.py; Roaring bitmaps for the deletion
# vectors of tests/test_deletion_vectors.py and cpp/fuzz/make_corpus.py).
python -m pip install -q pandas polars duckdb "deltalake==1.6.6" "pyroaring==1.2.0"
# output="jax" (tests/test_jax.py); the CPU build.
python -m pip install -q "jax[cpu]==0.10.2"
# --no-build-isolation: build against the pyarrow installed above, so the
# extension and the runtime use the very same Arrow libraries.
python -m pip install -q --no-build-isolation --no-deps .
