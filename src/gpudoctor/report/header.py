"""The few lines a report about one failure (`gpudoctor run`, `gpudoctor explain`) starts with, before its verdict:
what was examined, the GPU with its driver and CUDA, and the packages the failure involves — the whole inventory stays
in the JSON, the TUI and the doctor's own report. Pure: reads the Report.
"""

from __future__ import annotations

import re
from collections import Counter

from gpudoctor.model import ProbeResult, Report
from gpudoctor.protocol import LOG_RUN_ID

# An import root seen in a failure's paths -> the distributions that install it (a prefix ends with "-").
_DISTRIBUTIONS = {
    "torch": ("torch",), "triton": ("triton",), "cupy": ("cupy-",), "cupy_backends": ("cupy-",),
    "numba": ("numba-cuda",), "numba_cuda": ("numba-cuda",), "cuda": ("cuda-core", "cuda-bindings", "cuda-python"),
    "max": ("max",), "mojo": ("mojo-compiler",), "numpy": ("numpy",), "cffi": ("cffi",),
}  # fmt: skip
# A package's folder in a path: under site-packages, or MAX's own folders wherever it was installed (a --target folder).
_PACKAGE_PATH = re.compile(
    r"(?:site|dist)-packages/([A-Za-z_]\w*)|/(max)/(?:engine|experimental|driver|graph|_core|torch)\b"
)


def _roots(result: ProbeResult) -> list[str]:
    texts = [f.file for f in result.frames] + [f.where or "" for f in (result.native.frames if result.native else ())]
    texts += [*result.mapped_libraries, result.stderr_tail or "", result.message or ""]
    seen: dict[str, None] = {}
    for text in texts:
        for match in _PACKAGE_PATH.finditer(text):
            seen.setdefault(match[1] or match[2], None)
    return list(seen)


def involved_packages(report: Report, result: ProbeResult) -> list[str]:
    """The installed distributions the failing run touched (its frames, its text, the libraries it had mapped), as
    "name version", in the inventory's order."""
    wanted = [d for root in _roots(result) for d in _DISTRIBUTIONS.get(root, ())]
    found = []
    for name, version in report.environment.packages.items():
        if version and any(name == d or (d.endswith("-") and name.startswith(d)) for d in wanted):
            found.append(f"{name} {version}")
    if report.environment.stack.torch_cuda:
        found = [f"{p} (CUDA {report.environment.stack.torch_cuda})" if p.startswith("torch ") else p for p in found]
    return found


def _gpus(report: Report) -> str:
    driver = report.environment.driver
    if not driver.available:
        return driver.status or "no NVIDIA driver"
    models = Counter(
        f"{g.name or 'GPU'} (sm_{(g.compute_capability or '?').replace('.', '')})" for g in driver.gpus
    )  # fmt: skip
    gpus = ", ".join(f"{n} x {m}" if n > 1 else m for m, n in models.items()) or "no GPU"
    return f"{gpus} · driver {driver.version or '?'} · CUDA {driver.cuda_driver_version or '?'}"


def header_lines(report: Report, result: ProbeResult) -> list[str]:
    """What was examined, where, and which packages its failure involves: three lines."""
    packages = involved_packages(report, result)
    if result.id == LOG_RUN_ID:
        from gpudoctor.facts.reported import reported

        gives = reported(result.stderr_tail or "").lines()
        log = (result.command or "a log").removeprefix("gpudoctor explain ")
        return [f"gpudoctor {report.doctor_version} · explain: {log}",
                "the log's machine, as its text gives it: " + (", ".join(gives) if gives else "no versions in the log"),
                "(read on this machine, whose own inventory is not the log's: --json has it)"]  # fmt: skip
    return [f"gpudoctor {report.doctor_version} · run: {result.command or '?'}",
            _gpus(report),
            "packages the failure involves: " + (", ".join(packages) or "none of the GPU stack's")
            + " (the whole inventory: --json)"]  # fmt: skip
