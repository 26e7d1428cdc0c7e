"""Workarounds the doctor can apply and verify, importable by users with one line.

``import gpudoctor.patches.float8`` at the top of a script applies that patch. The doctor itself never
imports a patch (they import torch); it hands the patch's file to a probe rerun instead.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor.protocol import PATCH_FILES_ENV

__all__ = ["PATCH_FILES_ENV", "PATCH_MODULES", "patch_file"]

# Patch id (as named by known_issues.toml) -> module file in this package.
PATCH_MODULES = {"float8-e8m0fnu-alias": "float8.py"}


def patch_file(patch_id: str) -> Path:
    """The file a probe runs to apply ``patch_id``; KeyError for an unknown patch."""
    return Path(__file__).with_name(PATCH_MODULES[patch_id])
