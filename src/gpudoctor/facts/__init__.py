"""What the doctor knows of a machine without running anything of the examined stack:
NVML, package metadata, files on disk and the loader's view."""
