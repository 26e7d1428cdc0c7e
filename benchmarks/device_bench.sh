#!/usr/bin/env bash
# The performance figures on the GPU machine (see ../shared/device/README.md for bringing MAX there):
#   benchmarks/device_bench.sh LABEL SRC [bench_suite.py options]
# runs bench_inventory.py and bench_suite.py with gpudoctor imported from SRC (src/ for this checkout, or an
# older checkout's src/ to compare) and writes LABEL-inventory.txt and LABEL-suite.txt under $OUT. Packages the
# machine lacks (MAX, ...) are taken from $SITE, where they were installed with `pip --target`, if set.
set -uo pipefail
label=$1 src=$2
shift 2
export PYTHONPATH="${SITE:+$SITE:}$(readlink -f "$src")"
python3 benchmarks/bench_inventory.py --runs 3 > "$OUT/$label-inventory.txt" 2>&1
python3 benchmarks/bench_suite.py "$@" > "$OUT/$label-suite.txt" 2>&1
tail -30 "$OUT/$label-suite.txt"
