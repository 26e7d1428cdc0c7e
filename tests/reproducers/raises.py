"""A user's reproducer that fails with a Python exception."""

import importlib.metadata

version = importlib.metadata.version("numpy")
raise RuntimeError(f"wrong result on numpy {version}: expected 2.0, got 4.0")
