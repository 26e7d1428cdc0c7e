"""The stack facts as the report carries them: the examined interpreter's raw answer and what the fact finders
return, turned into typed ``StackFacts``, paths redacted, shapes checked (the raw answer comes from another process)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpudoctor.facts.beside import Beside
from gpudoctor.facts.buildtools import build_facts, triton_ptxas
from gpudoctor.facts.libraries import library_facts
from gpudoctor.facts.requirements import unmet_requirements
from gpudoctor.facts.runtimecompilers import runtime_compilers
from gpudoctor.facts.sanitizer import find_sanitizer
from gpudoctor.redact import redact_text
from gpudoctor.stackfacts import (
    BuildFacts,
    DeviceNodes,
    LibraryFact,
    RuntimeCompiler,
    StackFacts,
)


def _names(raw: Any) -> tuple[str, ...]:
    return tuple(str(n) for n in raw or [] if isinstance(n, str))


def _redacted(value: Any) -> Any:
    return redact_text(value) if isinstance(value, str) else value


def interpreter_facts(raw: Any) -> StackFacts:
    """What the examined interpreter said of itself (``_STACK_SOURCE``): paths redacted, shapes checked."""
    if not isinstance(raw, dict):
        return StackFacts()
    raw_modules, raw_sites = raw.get("modules"), raw.get("site_packages")
    modules: dict[str, Any] = raw_modules if isinstance(raw_modules, dict) else {}
    sites: list[Any] = raw_sites if isinstance(raw_sites, list) else []
    torch_cuda = raw.get("torch_cuda")
    return StackFacts(
        modules={str(k): None if v is None else redact_text(str(v)) for k, v in modules.items()},
        shadowing=_names(raw.get("shadowing")),
        site_packages=tuple(redact_text(str(p)) for p in sites),
        torch_cuda=None if torch_cuda is None else str(torch_cuda),
        no_bytecode=_names(raw.get("no_bytecode")),
        requirements_unmet=tuple(unmet_requirements(raw.get("distributions"), raw.get("markers"))),
    )


def library_fact(fact: Mapping[str, Any]) -> LibraryFact:
    """One entry of ``libraries.library_facts`` (paths redacted)."""
    same = fact.get("same_file")
    return LibraryFact(
        loader=_redacted(fact.get("loader")),
        via=_redacted(fact.get("via")),
        file=_redacted(fact.get("file")),
        pip=_redacted(fact.get("pip")),
        same_file=same if isinstance(same, bool) else None,
    )


def build_and_load_facts(raw: Any, python: str) -> tuple[BuildFacts, dict[str, LibraryFact]]:
    """What building and loading GPU code would use for the examined interpreter (its raw stack facts: site-packages,
    where torch is, its distributions): the extension build facts with Triton's ptxas and the runtime compilers, and
    the CUDA libraries as the loader resolves them — paths redacted."""
    raw = raw if isinstance(raw, dict) else {}
    sites = [str(s) for s in raw.get("site_packages") or [] if isinstance(s, str)]
    modules = raw.get("modules") if isinstance(raw.get("modules"), dict) else {}
    torch_at = modules.get("torch")
    torch_folder = None
    if isinstance(torch_at, str):
        torch_folder = torch_at if os.path.isdir(torch_at) else os.path.dirname(torch_at)
    # Each asks programs (nvcc, gcc, ptxas, ldconfig) unless their answers are kept: they wait side by side.
    ptxas = Beside(triton_ptxas, sites, os.environ, name="gpudoctor-ptxas")
    loader = Beside(library_facts, sites, name="gpudoctor-ldconfig")
    build = build_facts(os.environ, torch_folder, os.path.dirname(python))
    build.update(ptxas.result())
    found = loader.result()
    distributions = raw.get("distributions")
    if isinstance(distributions, list):
        build["setuptools"] = any(isinstance(d, list) and str(d[0]).lower() == "setuptools" for d in distributions)
    compilers = runtime_compilers(distributions if isinstance(distributions, list) else [], found, build)
    if (sanitizer := find_sanitizer(os.environ, [Path(s) for s in sites])) is not None:
        build["compute_sanitizer"], build["compute_sanitizer_from"] = sanitizer.path, sanitizer.found_by
    arch_names = build.pop("arch_names")
    facts = BuildFacts(
        **{key: _redacted(value) for key, value in build.items()},
        arch_names=None if arch_names is None else tuple(arch_names),
        runtime_compilers=tuple(
            RuntimeCompiler(compiler=c["compiler"], cuda=c["cuda"], source=redact_text(c["from"])) for c in compilers
        ),
    )
    return facts, {name: library_fact(fact) for name, fact in found.items()}


def device_nodes_fact(nodes: Mapping[str, Any]) -> DeviceNodes:
    """``nvml.device_nodes`` as a typed fact."""
    return DeviceNodes(present=_names(nodes.get("present")), inaccessible=_names(nodes.get("inaccessible")))
