#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs `shardfeed demo`: generates a synthetic
# tabular dataset once, trains a small MLP for two epochs on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${SHARDFEED_VENV:-.venv}/bin/shardfeed" demo "$@"
