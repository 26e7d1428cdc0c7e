"""The GPU's own instruments, read: compute-sanitizer's reports (and where to find the tool) turned into data
that the knowledge can explain."""
