#!/usr/bin/env bash
# The GPU path in one run (docs/gpu.md): scripts/gpu_check.sh [--dry-run] [--keep] [--only CHECKS] OUTDIR
# From the repository root of a fresh machine with a CUDA build of torch installed: installs the project
# (pinned, torch left as it is) when it is not yet importable, then runs the checks. Exit 1 if a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# found, not imported: importing Lightning only to ask costs seconds of every check's start
if ! "$PYTHON" -c "import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, ('ddp_parity', 'lightning'))))" 2>/dev/null; then
    "$PYTHON" -m pip install -q -e . -c constraints.txt
fi
exec "$PYTHON" scripts/gpu_check.py "$@"
