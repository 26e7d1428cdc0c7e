"""`gpudoctor fleet`: the doctor on every node of a Ray cluster at once, and the odd nodes out.

``report`` holds the fleet's data and its analysis (pure: groups by environment and outcome, differences);
``ray_runner`` is the only module that imports Ray (the optional extra ``gpudoctor[fleet]``).
"""

from gpudoctor.fleet.report import FleetReport, NodeRun, NodeStatus

__all__ = ["FleetReport", "NodeRun", "NodeStatus"]
