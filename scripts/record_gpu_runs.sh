#!/usr/bin/env bash
# Record, on a GPU machine, `gpudoctor run` on each program of tests/faulty_programs/ (the command, then its
# instrumented reruns): the plain report to $1/<program>.txt, the same report as JSON to $1/<program>.json.
# SANITIZE=1 adds --sanitize (a command that passes is rerun under compute-sanitizer too: the silent programs).
set -uo pipefail
out=${1:?usage: record_gpu_runs.sh OUTDIR [PROGRAM ...]}
cd "$(dirname "$0")/.."
mkdir -p "$out"
programs=("${@:2}")
[[ ${#programs[@]} -gt 0 ]] || programs=(tests/faulty_programs/*.py)
for prog in "${programs[@]}"; do
  name=$(basename "$prog" .py)
  start=$EPOCHREALTIME
  python3 -m gpudoctor run ${SANITIZE:+--sanitize} --plain --save-json "$out/$name.json" --no-debugger --timeout 300 -- python3 "$prog" \
    >"$out/$name.txt" 2>&1
  echo "$name rc=$? $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" "$EPOCHREALTIME" "$start")s"
done
