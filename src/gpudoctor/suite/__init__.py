"""The probe suite: the catalog, the plan and its schedule, the runner of one probe and the
caches probes share."""
