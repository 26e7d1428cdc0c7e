#!/usr/bin/env bash
# Set up gpudoctor's development environment in .venv (idempotent), then run the doctor or the tests.
#
#   scripts/dev.sh doctor [ARGS...]   set up, then run `gpudoctor ARGS` (default: the full diagnosis)
#   scripts/dev.sh test [PYTEST ARGS] set up, then lint, type-check and run the test suite
#   scripts/dev.sh setup              set up only
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv="$root/.venv"
python=${PYTHON:-python3}

setup() {
  # Reinstall only when the project's requirements changed since the last setup.
  local stamp
  stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
  if [[ -x "$venv/bin/python" && -f "$venv/.gpudoctor-stamp" && "$(cat "$venv/.gpudoctor-stamp")" == "$stamp" ]]; then
    return
  fi
  echo "dev.sh: setting up $venv (torch 2.13.0 CPU, MAX 26.7.0; a few minutes the first time)" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -c constraints.txt -e ".[stack,dev]"
  echo "$stamp" > "$venv/.gpudoctor-stamp"
}

command=${1:-doctor}
shift || true
case "$command" in
  setup)
    setup ;;
  doctor)
    setup
    exec "$venv/bin/gpudoctor" "$@" ;;
  test)
    setup
    "$venv/bin/ruff" check src tests benchmarks scripts
    "$venv/bin/ruff" format --check src tests benchmarks scripts
    "$venv/bin/mypy"
    exec "$venv/bin/python" -m pytest "$@" ;;
  *)
    echo "usage: scripts/dev.sh {doctor|test|setup} [ARGS...]" >&2
    exit 2 ;;
esac
