"""The interactive face: a Textual app (``app``) composed of widgets that render data (``widgets``), styled
by ``doctor.tcss``. Only `gpudoctor` on a terminal imports this package; no other face needs Textual.
"""

from __future__ import annotations

from gpudoctor.tui.app import DoctorApp, run_tui

__all__ = ["DoctorApp", "run_tui"]
