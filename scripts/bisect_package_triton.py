"""Issue 37's acceptance for `gpudoctor bisect --package`, for real (too heavy for CI: torch 2.6 is a ~3 GB CUDA
build): an environment with torch 2.6.0 and Triton 3.5.1 installed over torch's `triton==3.2.0` (as `pip install
triton==3.5.1` leaves it, with a warning), and tests/reproducers/torch_compile_cpu/repro.py, which fails there with
"cannot import name 'AttrsDescriptor'". The bisect over Triton 3.2.0..3.5 should say 3.2.0 -> 3.3.0, in at most
1 + 2*ceil(log2(n+1)) cells, and that torch 2.6.0 declares triton==3.2.0. docs/bisect-package.md holds its output.

    python scripts/bisect_package_triton.py [--work DIR]

uv reads its own configuration only; where this machine's pip configuration names wheelhouses and local indexes
(`pip config list`), they are handed to uv the way a user would (UV_FIND_LINKS, UV_EXTRA_INDEX_URL), unless UV_*
variables already say where to look.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPRO = "tests/reproducers/torch_compile_cpu/repro.py"


def uv_environment() -> dict[str, str]:
    """This process's environment, plus pip's configured wheelhouses and extra indexes as uv's variables."""
    env = dict(os.environ)
    if any(k in env for k in ("UV_FIND_LINKS", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX")):
        return env
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    config: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        config[key.split(".", 1)[-1]] = value.strip().strip("'\"")
    if config.get("find-links"):
        env["UV_FIND_LINKS"] = config["find-links"].replace(" ", ",")
    if config.get("extra-index-url"):
        env["UV_EXTRA_INDEX_URL"] = config["extra-index-url"]
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # pip's way: the best version from every index
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpudoctor-bisect-triton"))
    parser.add_argument("--torch", default="2.6.0")
    parser.add_argument("--triton", default="3.5.1", help="the Triton the examined environment has")
    parser.add_argument("--range", default="3.2.0..3.5")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from gpudoctor.sweep.envs import find_uv

    uv, env = find_uv(), uv_environment()
    work = options.work.absolute()
    examined = work / "examined"
    python = examined / "bin" / "python"
    started = time.monotonic()
    if not python.is_file():
        version = "{}.{}".format(*sys.version_info[:2])
        # --seed: pip (and setuptools on 3.11), as `python -m venv` gives a user; Triton 3.2 needs setuptools
        subprocess.run([uv, "venv", "--quiet", "--seed", "--python", version, str(examined)], check=True, env=env)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), f"torch=={options.torch}"],
                       check=True, env=env)  # fmt: skip
        override = work / "triton-override.txt"
        override.write_text(f"triton=={options.triton}\n")
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), "--overrides", str(override),
                        f"triton=={options.triton}"], check=True, env=env)  # fmt: skip
    print(f"examined environment ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
    gpudoctor = [sys.executable, "-m", "gpudoctor", "bisect", "--package", "triton", options.range, "--python",
                 str(python), "--envs", str(work / "envs"), "--no-debugger"]  # fmt: skip
    run_env = {**env, "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    completed = subprocess.run([*gpudoctor, "--json", "--", "python", REPRO], capture_output=True, text=True,
                               cwd=ROOT, env=run_env)  # fmt: skip
    seconds = time.monotonic() - started
    sys.stderr.write(completed.stderr)
    report = json.loads(completed.stdout)
    (work / "bisect.json").write_text(completed.stdout)
    text = subprocess.run([*gpudoctor, "--", "python", REPRO], capture_output=True, text=True, cwd=ROOT, env=run_env)
    print(text.stdout)
    n = len(report["versions"])
    bound = 1 + 2 * math.ceil(math.log2(n + 1))
    print(f"{len(report['cells'])} cells of {n} releases (bound 1 + 2*ceil(log2(n+1)) = {bound}); {seconds:.0f} s")
    exact = [(t["before"], t["after"]) for t in report["transitions"] if t["exact"]]
    declared = [line for line in report["verdict"] if "declares triton==" in line]
    broke = any(line.startswith("it broke 3.2.0 -> 3.3.0") for line in report["verdict"])
    ok = broke and ("3.2.0", "3.3.0") in exact and len(report["cells"]) <= bound
    ok = ok and any(d.startswith("torch 2.6.0 declares triton==3.2.0; 3.3.0 breaks it") for d in declared)
    print("acceptance:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
