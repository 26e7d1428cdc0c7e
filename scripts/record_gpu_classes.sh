#!/usr/bin/env bash
# Record, on a GPU machine, `gpudoctor run` on programs of tests/faulty_programs/ (issue 44's failure classes), several
# at once: the plain report to $1/<program>.txt, the JSON to $1/<program>.json, and one line per program to
# $1/tally.txt with its exit status and the whole run's wall seconds (a hang runs with --timeout $HANG_TIMEOUT).
#   scripts/record_gpu_classes.sh OUTDIR PROGRAM...      (JOBS=4 by default)
set -uo pipefail
out=${1:?usage: record_gpu_classes.sh OUTDIR PROGRAM...}
shift
cd "$(dirname "$0")/.."
mkdir -p "$out"
record() {
  local prog=$1 out=$2 name limit start rc
  name=$(basename "$prog" .py)
  limit=300
  [[ $name == hang_* ]] && limit=${HANG_TIMEOUT:-30}
  start=$EPOCHREALTIME
  python3 -m gpudoctor run --plain --save-json "$out/$name.json" --timeout "$limit" -- python3 "$prog" >"$out/$name.txt" 2>&1
  rc=$?
  echo "$name rc=$rc timeout=${limit}s wall=$(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" "$EPOCHREALTIME" "$start")s" >>"$out/tally.txt"
}
export -f record
printf '%s\n' "$@" | xargs -P "${JOBS:-4}" -I{} bash -c 'record "$@"' _ {} "$out"
cat "$out/tally.txt"
