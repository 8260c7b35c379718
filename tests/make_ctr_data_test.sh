#!/usr/bin/env bash
# tools/make-ctr-data, the Criteo-layout click log generator: deterministic
# output, the layout and meta.json (tests/make_ctr_data_test.py; skips
# without NumPy).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/make_ctr_data_test.py" "$1"
