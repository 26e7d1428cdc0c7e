"""Write docs/tui.svg: the TUI after a real run of the probe suite on this machine, plus two synthetic
probes that really segfault and hang, with the crashed probe selected.

Run: .venv/bin/python scripts/tui_screenshot.py
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ROOT / "tests" / "synthetic_probes"
EXTRA = """
[[probe]]
id = "segfaults"
script = "segfaults.py"
title = "synthetic: reads address 0"
stage = 1

[[probe]]
id = "hangs"
script = "hangs.py"
title = "synthetic: sleeps forever"
stage = 1
timeout_s = 3
"""


async def shoot(probes: Path, target: Path) -> None:
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.tui import DoctorApp

    app = DoctorApp(DoctorOptions(probe_dir=probes, jobs=2), export_dir=Path(tempfile.mkdtemp()))
    async with app.run_test(size=(170, 48)) as pilot:
        while app.report is None:
            await pilot.pause(0.5)
        while app.selected_run_id() != "segfaults":
            await pilot.press("down")
        await pilot.pause(0.5)
        app.save_screenshot(target.name, path=str(target.parent))


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        probes = Path(scratch) / "probes"
        shutil.copytree(ROOT / "probes", probes)
        for name in ("segfaults", "hangs"):
            text = (SYNTHETIC / f"{name}.py").read_text().replace("import _use_harness  # noqa: F401\n", "")
            (probes / f"{name}.py").write_text(text)
        catalog = probes / "catalog.toml"
        catalog.write_text(catalog.read_text() + EXTRA)
        started = time.monotonic()
        target = ROOT / "docs" / "tui.svg"
        asyncio.run(shoot(probes, target))
    print(f"wrote {target} after {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
