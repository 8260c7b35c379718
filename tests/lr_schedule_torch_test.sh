#!/usr/bin/env bash
# cohort's learning-rate schedules against PyTorch 1.13's
# schedulers, step by step (tests/lr_schedule_torch.py; skips without
# python3-torch).
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/lr_schedule_torch.py" "$1"
