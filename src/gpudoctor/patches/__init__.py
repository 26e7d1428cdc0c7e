"""Workarounds the doctor can apply and verify.

Three ways to use one: paste the patch file's text at the top of a script (`gpudoctor patch show ID`);
``import gpudoctor.patches.float8`` where gpudoctor is installed; or `gpudoctor patch install ID --python PY`,
which puts the patch and a small import hook into that environment (and `gpudoctor patch remove` takes them
out). The doctor itself never imports a patch (they import torch); it hands the patch's file to a probe rerun.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor.protocol import PATCH_FILES_ENV

__all__ = ["PATCH_FILES_ENV", "PATCH_MODULES", "install_files", "installed_file", "patch_file"]

# Patch id (as named by known_issues.toml) -> module file in this package.
PATCH_MODULES = {"float8-e8m0fnu-alias": "float8.py"}


def patch_file(patch_id: str) -> Path:
    """The file a probe runs to apply ``patch_id``; KeyError for an unknown patch."""
    return Path(__file__).with_name(PATCH_MODULES[patch_id])


HOOK_MODULE = "gpudoctor_patches.py"
HOOK_PTH = "gpudoctor-patches.pth"


def installed_file(patch_id: str) -> str:
    """The name a patch gets in an environment's site-packages."""
    return f"gpudoctor_patch_{PATCH_MODULES[patch_id].removesuffix('.py')}.py"


def install_files(patch_id: str) -> dict[str, str]:
    """File name -> text, for an environment's site-packages: the patch, the hook that runs it just before MAX's
    bridge is imported, and the .pth line that loads the hook."""
    return {
        installed_file(patch_id): patch_file(patch_id).read_text(encoding="utf-8"),
        HOOK_MODULE: Path(__file__).with_name("hook.py").read_text(encoding="utf-8"),
        HOOK_PTH: "import gpudoctor_patches\n",
    }
