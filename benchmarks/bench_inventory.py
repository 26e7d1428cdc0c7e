"""The inventory-only run (`gpudoctor --json --no-probes`): its wall time warm and cold, and what each fact costs.

Usage: python benchmarks/bench_inventory.py [--runs N] [--cold-runs N] [--distributions N] [--no-collect-env]

Standalone: needs only gpudoctor's own dependencies (PYTHONPATH=src works; no pytest, no torch). Prints
- the wall time of `python -m gpudoctor --json --no-probes`, warm (gpudoctor's cache kept between runs; median of
  --runs) and cold (each run with an empty gpudoctor cache folder, so also without its kept bytecode where
  PYTHONDONTWRITEBYTECODE is set); beside them a bare interpreter's start and the imports of that run alone;
- in-process, the split by fact, cold (nothing kept: every program asked, every file parsed) and warm (median of 20),
  and their total; the goal of issue 38 is 0.25 s warm on the H100 machine.
`--distributions N` adds a folder of N synthetic distributions (copies of this interpreter's own metadata, renamed) to
PYTHONPATH for every measurement: the GPU machine has several hundred installed, a development venv far fewer.
Also runs `python -m torch.utils.collect_env` for comparison when torch is installed (--no-collect-env to skip).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.25


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, check=False
    )
    return time.perf_counter() - started


def synthetic_distributions(folder: Path, count: int) -> None:
    """``count`` .dist-info folders made from the metadata of the distributions this interpreter has (names changed,
    requirements kept), as a large environment's site-packages holds them."""
    from importlib import metadata

    sources = [d for d in metadata.distributions() if d.read_text("METADATA")]
    made = 0
    while sources and made < count:
        for source in sources:
            if made >= count:
                break
            text = source.read_text("METADATA") or ""
            name = f"{source.metadata['Name']}-copy{made}"
            text = re.sub(r"^Name: .*$", f"Name: {name}", text, count=1, flags=re.M)
            info = folder / f"{name.replace('-', '_')}-1.0.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(text, encoding="utf-8")
            (info / "RECORD").write_text(source.read_text("RECORD") or "", encoding="utf-8")
            made += 1


def summary(samples: list[float]) -> str:
    low, high = min(samples), max(samples)
    return f"median {statistics.median(samples):.3f} s (min {low:.3f}, max {high:.3f}, {len(samples)} runs)"


def process_figures(options: argparse.Namespace, env: dict[str, str]) -> float:
    doctor = [sys.executable, "-m", "gpudoctor", "--json", "--no-probes"]
    imports = [sys.executable, "-c", "import gpudoctor.program, gpudoctor.cli.doctor_command, gpudoctor.doctor"]
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as scratch:
        warm_env = {**env, "GPUDOCTOR_CACHE_DIR": str(Path(scratch) / "warm")}
        wall(doctor, warm_env)  # fills the cache and the page cache
        warm = [wall(doctor, warm_env) for _ in range(options.runs)]
        cold = [
            wall(doctor, {**env, "GPUDOCTOR_CACHE_DIR": str(Path(scratch) / f"cold{n}")})
            for n in range(options.cold_runs)
        ]
        bare = [wall([sys.executable, "-c", "pass"], env) for _ in range(options.runs)]
        imported = [wall(imports, warm_env) for _ in range(options.runs)]
    print(f"gpudoctor --json --no-probes, warm:        {summary(warm)}")
    print(f"gpudoctor --json --no-probes, cold cache:  {summary(cold)}")
    print(f"  a bare interpreter's start:              {summary(bare)}")
    print(f"  the same interpreter importing its modules: {summary(imported)}")
    if options.collect_env and importlib.util.find_spec("torch") is not None:
        collect = [
            wall([sys.executable, "-m", "torch.utils.collect_env"], env) for _ in range(max(1, options.runs // 2))
        ]
        print(f"python -m torch.utils.collect_env:          {summary(collect)}")
        print(f"collect_env / gpudoctor inventory (warm): {statistics.median(collect) / statistics.median(warm):.1f}x")
    return statistics.median(warm)


def fact_split(runs: int = 20) -> None:
    """In this process: each fact the inventory gathers, cold (an empty cache folder, nothing read yet) and warm."""
    from gpudoctor.facts import answers, inventory, requirements
    from gpudoctor.facts.buildtools import build_facts, triton_ptxas
    from gpudoctor.facts.libraries import library_facts
    from gpudoctor.facts.nvml import query_driver
    from gpudoctor.knowledge import load as knowledge_load
    from gpudoctor.knowledge import preflight

    memos = (answers.ANSWERS, requirements.CHECKED, knowledge_load.LOADED)
    raw = inventory._local_stack_facts()
    sites = [str(s) for s in raw["site_packages"]]
    torch_at = raw["modules"].get("torch")
    torch_folder = None if not torch_at else torch_at if os.path.isdir(torch_at) else os.path.dirname(torch_at)
    environment = inventory.collect_environment()
    parts: dict[str, Callable[[], Any]] = {
        "installed versions (one pass over sys.path)": lambda: inventory._local_packages(inventory.PACKAGES),
        f"interpreter's stack facts ({len(raw['distributions'])} distributions' headers)": inventory._local_stack_facts,
        "declared requirements checked (packaging)": lambda: requirements.unmet_requirements(
            raw["distributions"], raw["markers"]
        ),
        "extension build facts (nvcc, gcc, torch's arch names)": lambda: build_facts(
            os.environ, torch_folder, os.path.dirname(sys.executable)
        ),
        "Triton's ptxas (--version)": lambda: triton_ptxas(sites, os.environ),
        "CUDA libraries as the loader resolves them (ldconfig -p)": lambda: library_facts(sites),
        "NVML: driver and GPUs (a thread beside the rest)": query_driver,
        "knowledge loaded and the pre-flight checks": lambda: preflight(
            environment, knowledge_load.load_knowledge.__wrapped__()
        ),
        "the whole inventory (collect_environment)": inventory.collect_environment,
    }

    def timed(work: Callable[[], Any]) -> float:
        started = time.perf_counter()
        work()
        return (time.perf_counter() - started) * 1000

    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as scratch:
        before = os.environ.get("GPUDOCTOR_CACHE_DIR")
        cold: dict[str, float] = {}
        try:
            for n, (label, work) in enumerate(parts.items()):
                os.environ["GPUDOCTOR_CACHE_DIR"] = str(Path(scratch) / f"cold{n}")
                for memo in memos:
                    memo.forget()
                cold[label] = timed(work)
            os.environ["GPUDOCTOR_CACHE_DIR"] = str(Path(scratch) / "warm")
            for memo in memos:
                memo.forget()
            for work in parts.values():
                work()  # fills the warm cache
            warm = {label: statistics.median(timed(work) for _ in range(runs)) for label, work in parts.items()}
        finally:
            if before is None:
                os.environ.pop("GPUDOCTOR_CACHE_DIR", None)
            else:
                os.environ["GPUDOCTOR_CACHE_DIR"] = before
            for memo in memos:
                memo.forget()
    print(f"\nsplit by fact, in-process (warm: median of {runs})          {'cold':>9} {'warm':>9}")
    for label in parts:
        if label.startswith("the whole"):
            print(f"  {'sum of the facts above':<58} {sum(v for k, v in cold.items() if k != label):7.1f}ms "
                  f"{sum(v for k, v in warm.items() if k != label):7.1f}ms")  # fmt: skip
        print(f"  {label:<58} {cold[label]:7.1f}ms {warm[label]:7.1f}ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--distributions", type=int, default=0, help="synthetic distributions added to PYTHONPATH")
    parser.add_argument("--no-collect-env", dest="collect_env", action="store_false")
    options = parser.parse_args()
    env = dict(os.environ)
    if importlib.util.find_spec("gpudoctor") is None:  # run from a checkout: the sources beside this script
        sys.path.insert(0, str(ROOT / "src"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-dists-") as dists:
        if options.distributions:
            synthetic_distributions(Path(dists), options.distributions)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), dists) if p)
            sys.path.append(dists)
            print(f"with {options.distributions} synthetic distributions on PYTHONPATH")
        warm = process_figures(options, env)
        fact_split()
    verdict = "meets" if warm <= TARGET_S else "MISSES"
    print(f"\ninventory-only run, warm: {warm:.3f} s; goal <= {TARGET_S} s (issue 38, on the H100 machine): {verdict}")


if __name__ == "__main__":
    main()
