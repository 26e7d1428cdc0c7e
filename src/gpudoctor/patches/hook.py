"""Installed by `gpudoctor patch install` as ``gpudoctor_patches.py`` into an environment's site-packages (with a
one-line ``gpudoctor-patches.pth`` that imports it): runs the patch files beside it just before MAX's torch
bridge is imported, and only then (nothing is imported at interpreter start). Standard library only.

`gpudoctor patch remove` deletes the three kinds of file again; nothing else in the environment is touched.
"""

from __future__ import annotations

import importlib.abc
import os
import runpy
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

BRIDGES = ("max.torch", "max.experimental.torch")
HERE = os.path.dirname(os.path.abspath(__file__))


class _BeforeBridge(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name in BRIDGES:
            sys.meta_path.remove(self)
            for entry in sorted(os.listdir(HERE)):
                if entry.startswith("gpudoctor_patch_") and entry.endswith(".py"):
                    runpy.run_path(os.path.join(HERE, entry), run_name="gpudoctor_patch")
        return None


if not any(isinstance(finder, _BeforeBridge) for finder in sys.meta_path):
    sys.meta_path.insert(0, _BeforeBridge())
