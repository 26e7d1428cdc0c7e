"""A script that does not use the harness and dies with an uncaught exception."""

raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")
