"""The user's own Mojo kernel package: the static scan, the calls a probe makes, the report
section, and the pipeline that examines it."""
