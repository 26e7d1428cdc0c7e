"""`gpudoctor patch`: a verified workaround put into another environment and taken out again, for real."""

from __future__ import annotations

import subprocess
import sysconfig
import venv
from pathlib import Path

from conftest import run_cli

IMPORT_BRIDGE = "import max.experimental.torch as bridge; print('bridge imports')"


def _environment(tmp_path: Path) -> Path:
    """A fresh virtual environment that sees this one's torch and MAX (a .pth), with a sitecustomize that takes
    torch.float8_e8m0fnu away, as torch 2.6 lacks it."""
    target = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())  # fmt: skip
    (site / "inherit.pth").write_text(sysconfig.get_path("purelib") + "\n")
    (site / "sitecustomize.py").write_text("import torch\ndel torch.float8_e8m0fnu\n")
    return python


def test_install_makes_the_bridge_import_and_remove_undoes_it(tmp_path: Path) -> None:
    python = _environment(tmp_path)
    before = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert before.returncode != 0 and "float8_e8m0fnu" in before.stderr

    installed = run_cli("patch", "install", "float8-e8m0fnu-alias", "--python", str(python))
    assert installed.returncode == 0, installed.stderr
    written = [line.removeprefix("wrote ") for line in installed.stdout.splitlines() if line.startswith("wrote ")]
    assert sorted(Path(p).name for p in written) == [
        "gpudoctor-patches.pth", "gpudoctor_patch_float8.py", "gpudoctor_patches.py"
    ]  # fmt: skip
    assert "gpudoctor patch remove float8-e8m0fnu-alias --python" in installed.stdout
    after = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert "bridge imports" in after.stdout and "aliased it to" in after.stderr  # the patch says what it did
    quiet = subprocess.run([python, "-c", "import sys; print('torch' in sys.modules)"], capture_output=True, text=True)
    assert quiet.stdout.strip() == "True"  # (sitecustomize imports torch here; the hook itself imports nothing)

    removed = run_cli("patch", "remove", "float8-e8m0fnu-alias", "--python", str(python))
    assert removed.returncode == 0 and removed.stdout.count("removed ") == 3
    assert all(not Path(p).exists() for p in written)
    again = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert again.returncode != 0 and "float8_e8m0fnu" in again.stderr


def test_the_hook_imports_nothing_at_interpreter_start(tmp_path: Path) -> None:
    target = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    assert run_cli("patch", "install", "float8-e8m0fnu-alias", "--python", str(python)).returncode == 0
    started = subprocess.run(
        [python, "-c", "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'max')))"],
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0 and started.stdout.strip() == "[]"


def test_show_prints_the_snippet_to_paste_and_an_unknown_patch_is_a_usage_error() -> None:
    shown = run_cli("patch", "show", "float8-e8m0fnu-alias")
    assert shown.returncode == 0 and "def apply()" in shown.stdout
    unknown = run_cli("patch", "install", "no-such-patch")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
