"""`gpudoctor sweep`: the doctor over a grid of environments it builds itself with uv.

``grid`` (cells, versions, results), ``envs`` (uv environments; the only module that runs uv), ``run`` (the
sweep: build, examine, record, resume), ``picture`` (the grid as SVG).
"""
