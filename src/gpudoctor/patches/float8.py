"""Patch float8-e8m0fnu-alias: give a torch without ``torch.float8_e8m0fnu`` a stand-in, so MAX's torch
bridge, which names that dtype in a table built at import, can be imported.

Use: ``import gpudoctor.patches.float8`` before importing ``max.torch`` / ``max.experimental.torch``.
The alias is a different dtype (float8_e5m2, else uint8): never use it for real e8m0 data.
"""

from __future__ import annotations

import warnings


def apply() -> bool:
    """Alias the dtype if this torch lacks it; True when the alias was added."""
    import torch

    if hasattr(torch, "float8_e8m0fnu"):
        return False
    stand_in = getattr(torch, "float8_e5m2", torch.uint8)
    warnings.warn(
        f"gpudoctor: torch {torch.__version__} has no float8_e8m0fnu; aliased it to {stand_in} so MAX's bridge "
        "imports. It is a stand-in dtype: do not use it for real e8m0 data (upgrade to torch>=2.7 instead).",
        RuntimeWarning,
        stacklevel=2,
    )
    setattr(torch, "float8_e8m0fnu", stand_in)  # noqa: B010 -- torch's stubs do not allow plain assignment
    return True


apply()
