#!/usr/bin/env bash
# Record, on a GPU machine, how each program in tests/faulty_programs/ fails: plain, with CUDA_LAUNCH_BLOCKING=1,
# and under compute-sanitizer (memcheck; initcheck for the silent ones) with the frameworks' caching allocators
# off. Each run's exit status, seconds, stdout and stderr go to $1/<program>/<mode>.{rc,s,out,err}.
set -uo pipefail
out=${1:?usage: record_gpu_faults.sh OUTDIR [PROGRAM ...]}
cd "$(dirname "$0")/.."
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
programs=("${@:2}")
[[ ${#programs[@]} -gt 0 ]] || programs=(tests/faulty_programs/*.py)
nocache=(env PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH="$PWD/src/gpudoctor/instruments/hooks${PYTHONPATH:+:$PYTHONPATH}")
record() {  # record NAME MODE CMD...
  local dir="$out/$1" mode=$2; shift 2; mkdir -p "$dir"
  local t0=$EPOCHREALTIME
  timeout 300 "$@" >"$dir/$mode.out" 2>"$dir/$mode.err" </dev/null
  echo $? >"$dir/$mode.rc"
  python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" "$EPOCHREALTIME" "$t0" >"$dir/$mode.s"
  head -c 200000 "$dir/$mode.out" >"$dir/$mode.tmp" && mv "$dir/$mode.tmp" "$dir/$mode.out"
  head -c 200000 "$dir/$mode.err" >"$dir/$mode.tmp" && mv "$dir/$mode.tmp" "$dir/$mode.err"
  echo "$1 $mode rc=$(cat "$dir/$mode.rc") $(cat "$dir/$mode.s")s"
}
for prog in "${programs[@]}"; do
  name=$(basename "$prog" .py)
  record "$name" plain python3 "$prog"
  record "$name" blocking env CUDA_LAUNCH_BLOCKING=1 python3 "$prog"
  record "$name" memcheck "${nocache[@]}" "$sanitizer" --print-limit 20 --show-backtrace yes python3 "$prog"
  record "$name" memcheck-cached "$sanitizer" --print-limit 20 python3 "$prog"
  case $name in *silent*|*oob_read*) record "$name" initcheck "${nocache[@]}" "$sanitizer" --tool initcheck --print-limit 20 python3 "$prog";; esac
done
