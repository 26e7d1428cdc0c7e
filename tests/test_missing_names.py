"""Missing names looked up in the examined environment: a real venv on disk with real distributions (dist-info
METADATA and RECORD) where a name moved, was renamed or a submodule is missing, and a package of older code that
asks for the old name and declares the release it was written for; real programs fail with the real ImportError
under `gpudoctor run` and their logs under `gpudoctor explain`. Also the real MAX 26.7 installed here."""

from __future__ import annotations

import json
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from gpudoctor.facts import pysource
from gpudoctor.facts.distributions import Environment
from gpudoctor.facts.missing_names import MODULE, look_up, missing_name
from gpudoctor.knowledge.answer import GENERIC_ID
from gpudoctor.knowledge.located import located
from gpudoctor.model import Device, Outcome, ProbeResult
from gpudoctor.protocol import MISSING_NAME_DETAIL

LOCATED = "missing-name-located"
NEW = {  # newdist 2.0: Helper moved to newdist.legacy.tools, get_device_count renamed device_count, engine moved
    "newdist/__init__.py": "from newdist.core import device_count\n__version__ = '2.0'\n",
    "newdist/core.py": "import os\n\n\ndef device_count():\n    return 1\n",
    "newdist/legacy/__init__.py": "",
    "newdist/legacy/tools.py": "import os\n\n\nclass Helper:\n    pass\n",
    "newdist/legacy/engine.py": "RUNNING = True\n",
}
OLD = {"olddep/__init__.py": "", "olddep/helpers.py": "from newdist import Helper\n",
       "olddep/count.py": "from newdist import get_device_count\n", "olddep/engine.py": "import newdist.engine\n",
       "olddep/needs.py": "import missingdist\n"}  # fmt: skip
# freedep 0.30.4 asks newdist for a name newdist 2.0 moved, and declares no bound on newdist (numba-cuda 0.30.4 and
# numpy 2.5's row_stack, which lives in numpy.ma now, are this shape)
FREE = {"freedep/__init__.py": "", "freedep/stack.py": "import newdist\nstack = newdist.Helper\n"}


def _distribution(site: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    headers = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{headers}\nAbout it.\n")
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    record = [f"{r},sha256=,{len(t)}" for r, t in files.items()] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding newdist 2.0 and olddep 1.0, which declares newdist==1.0 (and missingdist>=1, not installed)."""
    root = tmp_path_factory.mktemp("names")
    venv.create(root / "venv", with_pip=False, symlinks=True)
    (site,) = (root / "venv" / "lib").glob("python3*/site-packages")
    _distribution(site, "newdist", "2.0", NEW)
    _distribution(site, "olddep", "1.0", OLD, ("newdist==1.0", "missingdist>=1", "pytest; extra == 'dev'"))
    _distribution(site, "freedep", "0.30.4", FREE)
    return root


def _run(root: Path, source: str, *args: str) -> dict[str, Any]:
    program = root / "prog.py"
    program.write_text(source)
    python = str(root / "venv" / "bin" / "python")
    completed = run_cli("run", "--json", "--python", python, *args, "--", python, str(program), timeout=300)
    assert completed.returncode == 1, completed.stderr
    report: dict[str, Any] = json.loads(completed.stdout)
    return report


def _located(report: dict[str, Any]) -> dict[str, Any]:
    (finding,) = [f for f in report["findings"] if f["id"] == LOCATED]
    ids = {f["id"] for f in report["findings"]}
    assert GENERIC_ID not in ids and "import-name-missing" not in ids  # it stands in for the generic answers
    return finding


def test_a_moved_name_asked_by_a_package_declaring_the_old_release_under_run(environment: Path) -> None:
    report = _run(environment, "import olddep.helpers\n")
    (run,) = report["results"]
    assert "cannot import name 'Helper' from 'newdist'" in run["stderr_tail"]  # the real ImportError
    finding = _located(report)
    assert finding["title"] == (
        "cannot import name 'Helper' from 'newdist': newdist 2.0 has it in newdist.legacy.tools (class, line 4)"
    )
    assert "olddep 1.0 asked for it (olddep/helpers.py:1)" in finding["evidence"]
    assert "olddep 1.0 declares newdist==1.0 (newdist 2.0 is installed: not met)" in finding["evidence"]
    # olddep's file is not the user's to edit: the advice is the release olddep declares, no new spelling
    assert finding["fix"] == "pip install 'newdist==1.0' (what olddep declares)."
    assert run["details"]["missing_name"]["provider"] == {"distribution": "newdist", "version": "2.0"}


def test_a_package_that_declares_no_bound_gets_advice_about_the_pairing(environment: Path) -> None:
    """numba-cuda 0.30.4 on numpy 2.5 (issue 43): the name moved to another module of the provider, the asker is an
    installed package with no bound on the provider. The advice is the provider's release line before the installed
    one, or a release of the asker that no longer asks — never an edit to the asker's files."""
    finding = _located(_run(environment, "import freedep.stack\n"))
    assert finding["title"] == (
        "module 'newdist' has no attribute 'Helper': newdist 2.0 has it in newdist.legacy.tools (class, line 4)"
    )
    assert "freedep 0.30.4 asked for it (freedep/stack.py:2)" in finding["evidence"]
    assert "freedep 0.30.4 declares no requirement on newdist" in finding["evidence"]
    assert finding["fix"] == (
        "pip install 'newdist<2' (the newdist releases before 2.0, which freedep 0.30.4 was written for), or a release "
        "of freedep newer than 0.30.4 that no longer asks for it, where one exists."
    )
    assert "newdist.legacy" not in finding["fix"] and "use " not in finding["fix"]


def test_the_same_failure_as_a_log_under_explain(environment: Path) -> None:
    python = str(environment / "venv" / "bin" / "python")
    log = environment / "job.log"
    log.write_text(
        "collecting ...\nTraceback (most recent call last):\n"
        '  File "/home/ci/project/test_it.py", line 2, in <module>\n    import olddep.count\n'
        '  File "/opt/conda/lib/python3.11/site-packages/olddep/count.py", line 1, in <module>\n'
        "    from newdist import get_device_count\n"
        "ImportError: cannot import name 'get_device_count' from 'newdist' "
        "(/opt/conda/lib/python3.11/site-packages/newdist/__init__.py)\n"
    )
    completed = run_cli("explain", "--json", "--python", python, str(log), timeout=120)
    assert completed.returncode == 1, completed.stderr
    finding = _located(json.loads(completed.stdout))
    assert "newdist 2.0 has no get_device_count; newdist has device_count (renamed, or a typo)" in finding["title"]
    assert "olddep 1.0 asked for it (olddep/count.py:1)" in finding["evidence"]
    assert finding["fix"].startswith("pip install 'newdist==1.0' (what olddep declares)")


def test_a_submodule_that_moved_and_one_not_imported(environment: Path) -> None:
    finding = _located(_run(environment, "import olddep.engine\n"))
    assert finding["title"] == "no module named 'newdist.engine': newdist 2.0 has it as newdist.legacy.engine"
    assert finding["fix"] == "pip install 'newdist==1.0' (what olddep declares)."
    finding = _located(_run(environment, "import newdist\nprint(newdist.legacy.RUNNING)\n"))
    assert "newdist.legacy is a submodule that newdist does not import itself" in finding["title"]
    assert "Your program asked for it (prog.py:2)." in finding["explanation"]
    assert finding["fix"] == "`import newdist.legacy` first."


def test_a_module_no_distribution_provides(environment: Path) -> None:
    finding = _located(_run(environment, "import olddep.needs\n"))
    assert finding["title"] == "no module named 'missingdist': no installed distribution provides missingdist"
    assert "olddep 1.0 declares missingdist>=1 (not installed: not met)" in finding["evidence"]
    assert finding["fix"].startswith("pip install 'missingdist>=1' (what olddep declares)")
    finding = _located(_run(environment, "import cv2\n"))
    assert finding["fix"] == "pip install opencv-python (the distribution that installs cv2)."
    finding = _located(_run(environment, "import frobnicator\n"))  # no table row, no declaration: no guess
    assert "pip install" not in finding["fix"]
    ids = {f["id"] for f in _run(environment, "import setuptools\n")["findings"]}  # the venv has none
    assert "cpp-extension-needs-setuptools-cpp-extension" in ids and LOCATED not in ids  # a class that says more


MAX_PYTHON = Path(sys.executable)


@pytest.mark.skipif(not (MAX_PYTHON.parent / "mojo").exists(), reason="needs the MAX installed in the project's venv")
def test_the_real_max_a_known_move_adds_no_noise_and_a_typo_gets_its_close_name(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text("from max.torch import CustomOpLibrary\n")  # seed 000's import, moved in 26.2
    completed = run_cli("run", "--json", "--", sys.executable, str(program), timeout=300)
    ids = {f["id"] for f in json.loads(completed.stdout)["findings"]}
    assert "max-torch-moved" in ids and LOCATED not in ids
    program.write_text("from max.graph import opz\n")
    completed = run_cli("run", "--json", "--", sys.executable, str(program), timeout=300)
    (finding,) = [f for f in json.loads(completed.stdout)["findings"] if f["id"] == LOCATED]
    assert finding["title"].startswith("cannot import name 'opz' from 'max.graph': max 26.7")
    assert "max.graph has ops (renamed, or a typo)" in finding["title"]


def test_the_lookup_reads_only_files_and_stops_at_its_limits(
    environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (site,) = (environment / "venv" / "lib").glob("python3*/site-packages")
    env = Environment([site])
    missing = missing_name("ModuleNotFoundError: No module named 'newdist.cor'")
    assert missing is not None and missing.kind == MODULE
    assert look_up(missing, env, {})["close"] == ["core"]
    assert missing_name("No module named '" + "a." * 50_000 + "b'") is None  # a log's hostile name: not walked
    seen = missing_name("ModuleNotFoundError: No module named 'newdist'")  # installed: another Python ran it
    assert seen is not None
    run = ProbeResult(
        "log", "log", Device.NONE, Outcome.FAIL, 0.0, details={MISSING_NAME_DETAIL: look_up(seen, env, {})}
    )
    words = located(run)
    assert words is not None and words.values["where_now"].startswith("newdist is installed here (newdist 2.0)")
    text = "ImportError: cannot import name 'Helper' from 'newdist' (unknown location)"
    found = look_up(missing_name(text), env, {})  # type: ignore[arg-type]
    assert found["found"][0]["module"] == "newdist.legacy.tools" and found["searched"]["capped"] is False
    monkeypatch.setattr(pysource, "MAX_BYTES", 10)  # one file read, then the budget is spent
    capped = look_up(missing_name(text), env, {})  # type: ignore[arg-type]
    assert capped["searched"] == {"files": 1, "capped": True}
    assert not [m for m in sys.modules if m.split(".")[0] in ("newdist", "olddep")]  # read, never imported


def test_a_probe_that_fails_on_a_moved_name_gets_the_lookup_too(environment: Path, tmp_path: Path) -> None:
    probes = Path(__file__).resolve().parent.parent / "probes"
    (tmp_path / "catalog.toml").write_text(
        '[[probe]]\nid = "imports-old"\nscript = "imports_old.py"\ntitle = "imports olddep.helpers"\nstage = 0\n'
    )
    (tmp_path / "imports_old.py").write_text(
        f"import sys\nsys.path.insert(0, {str(probes)!r})\nfrom _harness import run_probe\n\n\n"
        "def main(ctx):\n    ctx.step('import olddep.helpers')\n    import olddep.helpers\n\n\n"
        "run_probe('imports-old', main, devices=())\n"
    )
    python = str(environment / "venv" / "bin" / "python")
    completed = run_cli("--json", "--probes", str(tmp_path), "--python", python, timeout=300)
    assert completed.returncode == 1, completed.stderr
    finding = _located(json.loads(completed.stdout))
    assert finding["runs"] == ["imports-old"]
    assert "newdist 2.0 has it in newdist.legacy.tools" in finding["title"]
    assert "olddep 1.0 declares newdist==1.0 (newdist 2.0 is installed: not met)" in finding["evidence"]


@pytest.mark.parametrize("kind", ["import-name", "attribute", MODULE])
@pytest.mark.parametrize("declared", [[], [{"requirement": "newdist==1.0", "distribution": "newdist",
                                            "installed": "2.0", "holds": False}],
                                      [{"requirement": "newdist>=1", "distribution": "newdist", "installed": "2.0",
                                        "holds": True}]])  # fmt: skip
@pytest.mark.parametrize("where", ["found", "submodule", "close", "nowhere"])
def test_no_advice_edits_an_installed_packages_files(kind: str, declared: list[Any], where: str) -> None:
    """Whatever the lookup found, when the code that asked belongs to an installed distribution the fix names
    releases to install, never a spelling to write into that distribution's files."""
    detail: dict[str, Any] = {
        "kind": kind, "name": "Helper", "module": "newdist", "provider": {"distribution": "newdist", "version": "2.0"},
        "asker": {"file": "olddep/helpers.py", "line": 1, "distribution": "olddep", "version": "1.0",
                  "requires": declared},
    }  # fmt: skip
    if where == "found":
        detail["found"] = [{"module": "newdist.legacy.tools", "how": "class", "line": 4}]
    elif where == "submodule":
        detail["submodule"] = True
    elif where == "close":
        detail["close"] = ["Helpers"]
    if kind == MODULE:
        detail["installed"] = "newdist"
    run = ProbeResult("run", "run", Device.NONE, Outcome.FAIL, 0.0, details={MISSING_NAME_DETAIL: detail})
    words = located(run)
    assert words is not None
    fix = words.values["fix"]
    assert "`" not in fix and " use " not in fix and "in code you own" not in fix, fix
    assert fix.startswith(("pip install '", "Install the release")), fix
