#!/usr/bin/env bash
# Record, on a GPU machine, issue 49's failure classes (tests/faulty_programs/: a divergent barrier, a 32-bit index
# overflow, out of memory because of another process or the program's own child, no binary for the GPU, stream
# order, a plain Python error): what each program prints and what the GPU's own tools print for it, and/or what
# `gpudoctor run` says of it.
#
#   scripts/record_gpu_verdicts.sh raw OUTDIR         the plain runs and the tools: OUTDIR/<program>/<what>.txt, .rc
#   scripts/record_gpu_verdicts.sh gpudoctor OUTDIR   `gpudoctor run --plain --save-json` on each program:
#                                                     OUTDIR/<program>/gpudoctor.txt, .json, .rc
#   scripts/record_gpu_verdicts.sh raw|gpudoctor OUTDIR PROGRAM...   only those programs (names without .py)
#   scripts/record_gpu_verdicts.sh all OUTDIR         both, the gpudoctor runs of the programs that need no GPU
#                                                     memory to themselves beside the raw captures (JOBS=3), the
#                                                     out-of-memory programs last and one at a time
#
# Environment: GPUDOCTOR (default `python3 -m gpudoctor`: put the checkout's src on PYTHONPATH, or install it),
# GD_TIMEOUT (gpudoctor's --timeout, default 120), JOBS (parallel gpudoctor runs, default 3). The out-of-memory
# programs size their allocations by the GPU's total memory (oom_other_process.py wants half of it, so the holder
# takes 60%), so the recording works on an H100 or an H200. compute-sanitizer, cuobjdump and nvidia-smi come from
# the CUDA toolkit on PATH (or /usr/local/cuda/bin). Every step runs under `timeout`.
#
# As recorded in tests/fixtures/h100/verdicts/raw/ (the lent GPU machine has no registry and no textual/msgspec):
# carry the wheels of msgspec, textual and tomli-w (and textual's needs) in .whl, and gpudoctor's commit as
# `git archive COMMIT src probes kernels pyproject.toml` unpacked in .devwheels/gdhead, then
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   GPUDOCTOR="env PYTHONPATH=/tmp/site:$PWD/.devwheels/gdhead/src python3 -m gpudoctor" \
#     timeout 545 scripts/record_gpu_verdicts.sh all /tmp/rec; tar czf $OUT/rec.tgz -C /tmp rec
# (about 4 minutes on an H100; `gpudoctor` mode alone records a later gpudoctor on all these programs).
set -uo pipefail
mode=${1:?usage: record_gpu_verdicts.sh raw|gpudoctor|all OUTDIR}
out=${2:?usage: record_gpu_verdicts.sh raw|gpudoctor|all OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/gpudoctor_verdicts_ext}
P=tests/faulty_programs
GPUDOCTOR=${GPUDOCTOR:-python3 -m gpudoctor}
GD_TIMEOUT=${GD_TIMEOUT:-120}
HOLDER=$P/hold_gpu_memory.py
# The programs whose gpudoctor runs may go beside others; the out-of-memory ones need the GPU to themselves.
SHARED=(barrier_divergent_cupy overflow_index_cupy overflow_index_triton nobinary_cudabindings nobinary_extension
  stream_order_torch pyerror_nameerror)
OOM=(oom_own_child oom_other_process)

log() { echo "[$(date +%T)] $*" | tee -a "$out/log.txt" >&2; }

# cap NAME WHAT SECONDS CMD...: run CMD, its stdout+stderr to OUTDIR/NAME/WHAT.txt, its status to WHAT.rc.
cap() {
  local name=$1 what=$2 limit=$3 start rc
  shift 3
  mkdir -p "$out/$name"
  start=$EPOCHREALTIME
  timeout -k 5 "$limit" "$@" >"$out/$name/$what.txt" 2>&1
  rc=$?
  echo "$rc" >"$out/$name/$what.rc"
  log "$name $what rc=$rc $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}")s"
}

# smi_loop FILE: nvidia-smi's compute apps and the python processes, every 0.3 s, until killed.
smi_loop() {
  while :; do
    echo "== $(date +%s.%N)"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    ps -eo pid,ppid,rss,args | awk '$4 ~ /python3$/' | cut -c1-160
    sleep 0.3
  done >"$1" 2>&1
}

total_gib() { nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print $1 / 1024}'; }

# start_holder NAME WHAT: start hold_gpu_memory.py with 60% of the GPU for 900 s; what it prints to
# OUTDIR/NAME/WHAT.txt, its pid to WHAT.pid.
start_holder() {
  local name=$1 what=$2 gib i
  mkdir -p "$out/$name"
  gib=$(total_gib | awk '{printf "%.1f", $1 * 0.6}')
  python3 "$HOLDER" "$gib" 900 >"$out/$name/$what.txt" 2>&1 &
  HOLDER_PID=$!
  echo "$HOLDER_PID" >"$out/$name/$what.pid"
  for i in $(seq 1 120); do
    grep -q holding "$out/$name/$what.txt" && break
    kill -0 "$HOLDER_PID" 2>/dev/null || break
    sleep 0.25
  done
  log "holder pid $HOLDER_PID: $(cat "$out/$name/$what.txt")"
}
stop_holder() { kill "$HOLDER_PID" 2>/dev/null; wait "$HOLDER_PID" 2>/dev/null; }

# oom_capture NAME: the plain run with nvidia-smi sampled all the while (smi.txt), and once before and after.
oom_capture() {
  local name=$1 smi
  mkdir -p "$out/$name"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$out/$name/smi-before.txt" 2>&1
  smi_loop "$out/$name/smi.txt" &
  smi=$!
  echo "program start $(date +%s.%N)" >"$out/$name/times.txt"
  cap "$name" plain 150 python3 "$P/$name.py"
  echo "program end $(date +%s.%N)" >>"$out/$name/times.txt"
  kill "$smi"
  wait "$smi" 2>/dev/null
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$out/$name/smi-after.txt" 2>&1
}

raw_machine() {
  mkdir -p "$out/machine"
  # Keep nothing that names the machine: serials, UUIDs, bus ids.
  nvidia-smi -q 2>&1 | head -40 |
    sed -E -e '/(Serial|UUID|Bus Id|Part Number|Board I[dD]|Module I[dD]|PDI|VBIOS|Inforom|Image Version|Minor Number)/ s/: .*/: (redacted)/' \
      -e 's/^GPU [0-9A-Fa-f:.]+$/GPU (bus id redacted)/' \
    >"$out/machine/nvidia-smi-q-head40.txt"
  { which nvcc && nvcc --version; which cuobjdump compute-sanitizer; compute-sanitizer --version; python3 -c \
    "import torch, triton, cupy; print('torch', torch.__version__, 'triton', triton.__version__, 'cupy', cupy.__version__)"
    echo "CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS-unset}"; } >"$out/machine/tools.txt" 2>&1
}

raw_barrier_divergent_cupy() {
  local b=barrier_divergent_cupy
  cap $b plain 90 python3 $P/$b.py
  cap $b synccheck 180 compute-sanitizer --tool synccheck python3 $P/$b.py
  cap $b racecheck 180 compute-sanitizer --tool racecheck python3 $P/$b.py
}

raw_overflow() {
  cap "$1" plain 90 python3 "$P/$1.py"
  cap "$1" memcheck 240 compute-sanitizer --tool memcheck python3 "$P/$1.py"
}
raw_overflow_index_cupy() { raw_overflow overflow_index_cupy; }
raw_overflow_index_triton() { raw_overflow overflow_index_triton; }

raw_nobinary_cudabindings() {
  local n=nobinary_cudabindings cubin
  cap $n plain 60 python3 $P/$n.py
  cubin=$(python3 -c "import tempfile, os; print(os.path.join(tempfile.gettempdir(), 'scale_sm80.cubin'))")
  cap $n cuobjdump-list-elf 30 cuobjdump --list-elf "$cubin"
  cap $n cuobjdump-list-ptx 30 cuobjdump --list-ptx "$cubin"
  cap $n cuobjdump-elf-header 30 bash -c "cuobjdump --dump-elf '$cubin' | head -30"
}

raw_nobinary_extension() {
  local e=nobinary_extension so
  cap $e plain 300 python3 $P/$e.py
  so=$(find "$TORCH_EXTENSIONS_DIR" -name 'add_one_ext*.so' | head -1)
  echo "$so" | sed "s|$TORCH_EXTENSIONS_DIR|\$TORCH_EXTENSIONS_DIR|" >"$out/$e/so-path.txt"
  cap $e cuobjdump-list-elf 30 cuobjdump --list-elf "$so"
  cap $e cuobjdump-list-ptx 30 cuobjdump --list-ptx "$so"
  cap $e build-ninja 10 bash -c "grep -E 'cuda_cflags|gencode|arch' '$(dirname "$so")/build.ninja'"
}

raw_stream_order_torch() {
  local s=stream_order_torch
  cap $s plain 60 python3 $P/$s.py
  cap $s plain-2 60 python3 $P/$s.py
  cap $s plain-3 60 python3 $P/$s.py
  cap $s launch-blocking 120 env CUDA_LAUNCH_BLOCKING=1 python3 $P/$s.py
  cap $s torch-cuda-sanitizer 180 env TORCH_CUDA_SANITIZER=1 python3 $P/$s.py
}

raw_pyerror_nameerror() { cap pyerror_nameerror plain 60 python3 $P/pyerror_nameerror.py; }

raw_oom_own_child() { oom_capture oom_own_child; }

raw_oom_other_process() {
  start_holder oom_other_process holder
  oom_capture oom_other_process
  stop_holder
}

raw_shared() {
  raw_machine
  local name
  for name in "${SHARED[@]}"; do "raw_$name"; done
}

raw_oom() { raw_oom_own_child; raw_oom_other_process; }

gd() {
  local name=$1
  cap "$name" gpudoctor $((GD_TIMEOUT * 6)) $GPUDOCTOR run --plain --save-json "$out/$name/gpudoctor.json" \
    --timeout "$GD_TIMEOUT" -- python3 "$P/$name.py"
}
export -f gd cap log
export out P GPUDOCTOR GD_TIMEOUT

gd_shared() { printf '%s\n' "$@" | xargs -P "${JOBS:-3}" -I{} bash -c 'gd "$@"' _ {}; }

gd_oom_other_process() {
  start_holder oom_other_process gpudoctor-holder
  gd oom_other_process
  stop_holder
}

gd_oom() { gd oom_own_child; gd_oom_other_process; }

# raw|gpudoctor OUTDIR PROGRAM...: only those programs (names without .py), one after another.
if [[ $# -gt 2 && $mode != all ]]; then
  for name in "${@:3}"; do
    case $mode:$name in
      raw:*) "raw_$name" ;;
      gpudoctor:oom_other_process) gd_oom_other_process ;;
      gpudoctor:*) gd "$name" ;;
    esac
  done
  log done
  exit 0
fi

case $mode in
  raw) raw_shared; raw_oom ;;
  gpudoctor) gd_shared "${SHARED[@]}"; gd_oom ;;
  all)
    raw_shared &
    raw=$!
    gd_shared "${SHARED[@]}"
    wait "$raw"
    raw_oom
    gd_oom
    ;;
  *) echo "unknown mode $mode (raw, gpudoctor, all)" >&2; exit 2 ;;
esac
log done
