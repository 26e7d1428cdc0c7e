#!/usr/bin/env bash
# Record, on a GPU machine, `gpudoctor kernel` on the test kernels of issues 36 and 39 (CPU and CUDA runs, and
# under compute-sanitizer with --sanitize): the JSON report to $1/<kernel>.json, the plain one to $1/<kernel>.txt.
#   scripts/record_gpu_kernels.sh OUTDIR [KERNEL ...]   (KERNEL: oob_read never_writes adds_into races)
set -uo pipefail
out=${1:?usage: record_gpu_kernels.sh OUTDIR [KERNEL ...]}
cd "$(dirname "$0")/.."
mkdir -p "$out"
kernels=("${@:2}")
[[ ${#kernels[@]} -gt 0 ]] || kernels=(oob_read never_writes adds_into races)
for kernel in "${kernels[@]}"; do
  case $kernel in
    oob_read) args=(--spec tests/kernels/oob_read/spec.toml --sanitize) ;;
    never_writes) args=(--op conv1d_stub --shape 4x4 --sanitize) ;;
    adds_into) args=(--op add_into --shape 4x4) ;;
    races) args=(--op racy_copy --shape 64x64) ;;
    *) echo "unknown kernel $kernel" >&2; exit 2 ;;
  esac
  start=$EPOCHREALTIME
  python3 -m gpudoctor kernel "tests/kernels/$kernel" "${args[@]}" --save-json "$out/$kernel.json" --plain \
    >"$out/$kernel.txt" 2>&1
  echo "$kernel rc=$? $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 1))" "$EPOCHREALTIME" "$start")s"
done
