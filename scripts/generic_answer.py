"""Measure the generic answer (finding `not-a-known-failure`) on the third held-out set
(tests/field_corpus/heldout3.toml) as its blind judgement was made (heldout3-blind.toml): each report's quote alone
in a file, through `gpudoctor explain --json --python EMPTY FILE`, where EMPTY is a venv with nothing installed, so
none of this machine's packages is taken for the reporter's. The generic answer's component and phase are compared
with the report's `component_key` and `phase`; the reports that get a specific finding are listed for judging by
hand; every `gpudoctor bisect` proposed is checked for its width.

    .venv/bin/python scripts/generic_answer.py              # the figure, per stack, and what to judge by hand
    .venv/bin/python scripts/generic_answer.py --local      # against this machine's .venv instead (no --python)
    .venv/bin/python scripts/generic_answer.py --in-process # the vocabulary's reading of all 59, without explain
    .venv/bin/python scripts/generic_answer.py --source DIR # explain from another checkout's src (a worktree of the
                                                            # blind judgement's commit reproduces its figure)
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import venv
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "field_corpus"
GENERIC = "not-a-known-failure"
# The vocabulary's component ids (and "package:X", "own") as heldout3.toml's component_key names them.
KEYS = {
    "triton": "triton", "mojo": "mojo", "max": "max", "numba": "numba-cuda", "cuda-python": "cuda-python",
    "cuda-driver": "cuda-driver", "cuda-runtime": "cuda-runtime", "container-toolkit": "container-toolkit",
    "torch-inductor": "torch-inductor", "nvrtc": "nvrtc", "cpp-extension": "cpp-extension",
    "setuptools": "cpp-extension", "pip": "pip", "own": "user-code", "torch": "torch", "cupy": "cupy",
    "gpu-hardware": "driver-hardware", "ptxas": "ptxas", "host-compiler": "host-compiler", "cuda-toolkit": "nvcc",
    # components outside the keys' list: heldout3's "other"
    "libnvvm": "other", "magic": "other", "nix": "other", "python-import": "other",
}  # fmt: skip
_BISECT = re.compile(r"gpudoctor bisect --package (?P<package>\S+) (?P<low>[\w.+]+)\.\.(?P<high>[\w.+]+)")
FEW = 2  # "a few releases": at most this many release lines below the upper bound


def key_of(component_id: str | None) -> str | None:
    if component_id is None:
        return None
    return "other" if component_id.startswith("package:") else KEYS.get(component_id, component_id)


def wide_bisects(text: str) -> list[str]:
    """The bisects ``text`` proposes over more than a few releases (another major line, or more than FEW minor
    lines)."""
    from packaging.version import InvalidVersion, Version

    wide = []
    for found in _BISECT.finditer(text):
        try:
            low, high = Version(found["low"]), Version(found["high"])
        except InvalidVersion:
            wide.append(found.group(0))
            continue
        if low.major != high.major or high.minor - low.minor > FEW:
            wide.append(found.group(0))
    return wide


def component_id_of(words: str) -> str | None:
    """The id of the component an evidence line names (its words start with the component's name)."""
    from gpudoctor.knowledge import load_knowledge
    from gpudoctor.knowledge.answer import UNNAMED
    from gpudoctor.knowledge.vocabulary import load_vocabulary

    if words.startswith(UNNAMED):
        return None
    if words.startswith("your program ("):
        return "own"
    if found := re.match(r"the package (\w+)", words):
        return f"package:{found[1]}"
    names = {c.name: c.id for c in load_vocabulary().components.values()}
    names.update({t.name: t.id for t in load_knowledge().toolchains if t.name not in names})
    return next((names[n] for n in sorted(names, key=len, reverse=True) if words.startswith(n)), None)


def parse_generic(line: str) -> tuple[str | None, str]:
    """(component id, phase) of a generic answer's evidence line: "log fail: WHO; during PHASE: ...; next: ..."."""
    body = line.split(": ", 1)[1]
    who, _, rest = body.partition("; during ")
    phase = re.match(r"[\w-]+", rest)
    return component_id_of(who.split(", called from ")[0]), phase.group(0) if phase else ""


def explain(quote: str, python: str | None, source: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "report.log"
        log.write_text(quote)
        command = [sys.executable, "-m", "gpudoctor", "explain", "--json", str(log)]
        command += ["--python", python] if python else []
        environment = {**os.environ, "PYTHONPATH": source} if source else None
        completed = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=environment)
    report: dict[str, Any] = json.loads(completed.stdout)
    return report


def in_process(quote: str) -> tuple[str | None, str, str]:
    """The generic answer of ``quote`` read here against an environment with nothing installed."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_field_corpus import H100

    from gpudoctor.knowledge import load_knowledge
    from gpudoctor.knowledge.answer import answer
    from gpudoctor.model import Device, Outcome, ProbeResult

    empty = dataclasses.replace(H100.environment, packages={})
    run = ProbeResult(id="log", probe="log", device=Device.NONE, outcome=Outcome.FAIL, duration_s=0.0,
                      stderr_tail=quote)  # fmt: skip
    said = answer(run, quote, empty, load_knowledge())
    return said.component_id, said.phase.split(" ")[0], said.line()


def main() -> None:
    reports = tomllib.loads((CORPUS / "heldout3.toml").read_text())["report"]
    blind = tomllib.loads((CORPUS / "heldout3-blind.toml").read_text())["judgement"]
    if "--in-process" in sys.argv[1:]:
        right = Counter[str]()
        for report in reports:
            component, phase, line = in_process(report["quote"])
            right["component"] += key_of(component) == report["component_key"]
            right["phase"] += phase == report["phase"]
            right["wide"] += bool(wide_bisects(line))
        total = len(reports)
        print(f"the vocabulary's reading of all {total}: component {right['component']}/{total}, "
              f"phase {right['phase']}/{total}, bisect_wide {right['wide']}")  # fmt: skip
        return
    with tempfile.TemporaryDirectory() as folder:
        python = None
        if "--local" not in sys.argv[1:]:
            venv.create(Path(folder) / "empty", with_pip=False)
            python = str(Path(folder) / "empty" / "bin" / "python")
        arguments = sys.argv[1:]
        source = arguments[arguments.index("--source") + 1] if "--source" in arguments else None
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answered = list(pool.map(lambda r: explain(r["quote"], python, source), reports))
    rows: dict[str, Counter[str]] = {}
    specific = []
    for report, explained in zip(reports, answered, strict=True):
        row = rows.setdefault(report["stack"], Counter())
        row["reports"] += 1
        findings = explained["findings"]
        texts = " ".join(" ".join([f["title"], f["fix"], *f["evidence"]]) for f in findings)
        row["bisect_wide"] += bool(wide_bisects(texts))
        was = blind[report["id"]]
        if was["verdict"] == "generic":
            row["blind generic"] += 1
            row["blind component"] += bool(was.get("component_right"))
            row["blind phase"] += bool(was.get("phase_right"))
        generic = [f for f in findings if f["id"] == GENERIC]
        others = [f for f in findings if f["id"] != GENERIC and f["severity"] == "problem"]
        if all(r["outcome"] == "pass" for r in explained["results"]):  # the log reader found no failure in it
            row["no failure"] += 1
            specific.append(f"  no failure found  {report['id']} (blind: {was['verdict']})")
        elif generic and not others:
            component, phase = parse_generic(generic[0]["evidence"][0])
            row["generic"] += 1
            row["component"] += key_of(component) == report["component_key"]
            row["phase"] += phase == report["phase"]
            if key_of(component) != report["component_key"] or phase != report["phase"]:
                specific.append(f"  generic  {report['id']}: {component}/{report['component_key']}, "
                                f"{phase}/{report['phase']}")  # fmt: skip
        else:
            said = "; ".join(f"{f['id']}: {f['title']}" for f in others or findings)
            specific.append(f"  specific {report['id']} (blind: {was['verdict']}): {said}")
    print(f"{'stack':<18} {'reports':>7} {'generic':>7} {'component':>9} {'phase':>5} {'wide':>4} {'none':>4}   "
          "blind generic/component/phase")  # fmt: skip
    total: Counter[str] = Counter()
    for stack in sorted(rows):
        row = rows[stack]
        total.update(row)
        print(f"{stack:<18} {row['reports']:>7} {row['generic']:>7} {row['component']:>9} {row['phase']:>5} "
              f"{row['bisect_wide']:>4} {row['no failure']:>4}   "
              f"{row['blind generic']}/{row['blind component']}/{row['blind phase']}")  # fmt: skip
    print(f"{'all':<18} {total['reports']:>7} {total['generic']:>7} {total['component']:>9} {total['phase']:>5} "
          f"{total['bisect_wide']:>4} {total['no failure']:>4}   "
          f"{total['blind generic']}/{total['blind component']}/{total['blind phase']}")  # fmt: skip
    print("to judge by hand (specific findings) and the generic answers that miss:")
    print("\n".join(specific) or "  none")


if __name__ == "__main__":
    main()
