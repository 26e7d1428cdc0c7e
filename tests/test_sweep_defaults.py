"""The sweep's default grid: with --torch or --max left out, the newest release of each of the newest lines the
package index offers, asked at every sweep (so the grid moves with the releases), and one clear error when the
index cannot be asked.

The index is real: a PEP 503 simple index of tiny real wheels in a folder (``file://``), read by pip as the user's
own configuration would point it (PIP_INDEX_URL), with this machine's pip configuration left out.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, tiny_wheel
from packaging.version import Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.sweep.grid import default_versions, newest_lines, release_lister

TORCH_RELEASES = ("2.12.1", "2.13.0", "2.13.0+cpu", "2.14.0", "2.14.1", "2.15.0", "2.16.0rc1")
MAX_RELEASES = ("25.4.0", "25.6.0", "25.6.1", "26.6.0", "26.7.0")


class SimpleIndex:
    """A package index in a folder: wheels, and one PEP 503 page per project linking them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.wheels = root / "wheels"
        self.wheels.mkdir(parents=True)

    @property
    def url(self) -> str:
        return (self.root / "simple").as_uri()

    def publish(self, name: str, *releases: str) -> None:
        for release in releases:
            tiny_wheel(self.wheels, name, release)
        page = self.root / "simple" / name / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="../../wheels/{wheel.name}">{wheel.name}</a>\n'
            for wheel in sorted(self.wheels.glob(f"{name.replace('-', '_')}-*.whl"))
        )
        page.write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n", encoding="utf-8")


def pip_environment(index_url: str) -> dict[str, str]:
    """This process's environment with pip (and uv) sent to ``index_url`` alone: no configuration file, no
    find-links or extra indexes of this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SimpleIndex:
    published = SimpleIndex(tmp_path_factory.mktemp("index"))
    published.publish("torch", *TORCH_RELEASES)
    published.publish("max", *MAX_RELEASES)
    return published


@pytest.fixture
def refused_url() -> Iterator[str]:
    """The URL of an index that refuses every connection: a port bound here and never listened on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}/simple"


def _dry_run(env: dict[str, str], *args: str) -> tuple[list[dict[str, Any]], str]:
    completed = run_cli("sweep", "--dry-run", "--json", "--python", "3.11", *args, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)["cells"], completed.stderr


def test_a_sweep_without_versions_takes_the_newest_line_releases_from_the_index(index: SimpleIndex) -> None:
    cells, stderr = _dry_run(pip_environment(index.url))
    grid = [(c["torch"], c["max"]) for c in cells]
    torches, maxes = ["2.13.0", "2.14.1", "2.15.0"], ["25.6.1", "26.6.0", "26.7.0"]
    assert grid == [(t, m) for t in torches for m in maxes]  # 2.13.0+cpu counts as 2.13.0; no 2.16.0rc1
    assert all(c["python"] == "3.11" for c in cells)
    assert "--torch 2.13.0,2.14.1,2.15.0: the newest release of each of its 3 newest lines" in stderr
    assert "--max 25.6.1,26.6.0,26.7.0" in stderr


def test_the_default_grid_moves_when_the_index_publishes_a_release(tmp_path: Path) -> None:
    moving = SimpleIndex(tmp_path)
    moving.publish("torch", "2.14.1", "2.15.0")
    moving.publish("max", "26.7.0")
    env = pip_environment(moving.url)
    before, _ = _dry_run(env)
    moving.publish("torch", "2.15.1", "2.16.0")
    moving.publish("max", "26.8.0")
    after, _ = _dry_run(env)
    assert [(c["torch"], c["max"]) for c in before] == [("2.14.1", "26.7.0"), ("2.15.0", "26.7.0")]
    assert [(c["torch"], c["max"]) for c in after] == [
        (t, m) for t in ("2.14.1", "2.15.1", "2.16.0") for m in ("26.7.0", "26.8.0")
    ]


def test_one_axis_given_the_other_follows_the_index_and_newest_sets_how_many_lines(index: SimpleIndex) -> None:
    cells, _ = _dry_run(pip_environment(index.url), "--max", "25.4.0", "--newest", "1")
    assert [(c["torch"], c["max"]) for c in cells] == [("2.15.0", "25.4.0")]
    cells, _ = _dry_run(pip_environment(index.url), "--torch", "2.14", "--newest", "5")
    assert [c["max"] for c in cells] == ["25.4.0", "25.6.1", "26.6.0", "26.7.0"]  # fewer lines than asked: all
    assert {c["torch"] for c in cells} == {"2.14.1"}


def test_an_index_that_cannot_be_reached_is_one_line_that_says_how_to_name_versions(refused_url: str) -> None:
    completed = run_cli("sweep", "--no-matrix", "--max", "26.7.0", env=pip_environment(refused_url), timeout=300)
    assert completed.returncode == 2, completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert line.startswith("gpudoctor: error: the default grid (no --torch) follows the newest releases")
    assert "the index cannot be reached" in line and "Connection refused" in line
    assert "give --torch exact versions" in line
    # Exact versions need no index: the same index refusing, a dry run of named cells answers.
    cells, _ = _dry_run(pip_environment(refused_url), "--torch", "2.15.0", "--max", "26.7.0")
    assert [(c["torch"], c["max"]) for c in cells] == [("2.15.0", "26.7.0")]


def test_an_index_without_the_package_is_the_same_clear_error(tmp_path: Path) -> None:
    empty = SimpleIndex(tmp_path)
    empty.publish("torch", "2.15.0")
    completed = run_cli("sweep", "--dry-run", env=pip_environment(empty.url), timeout=300)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert "the default grid (no --max)" in completed.stderr
    assert "cannot list the releases of max" in completed.stderr


def test_newest_lines_reads_the_lister_line_by_line() -> None:
    releases = [Version(v) for v in ("1.0", "2.6.0", "2.9.0", "2.9.1", "2.13.0", "2.13.0+cu130", "3.0.0rc1")]
    lister = lambda name: [v for v in releases if not v.is_prerelease]  # noqa: E731  (as released_versions answers)
    assert newest_lines("torch", lister, 2) == ["2.9.1", "2.13.0"]
    assert newest_lines("torch", lister, 9) == ["1.0", "2.6.0", "2.9.1", "2.13.0"]
    with pytest.raises(GpuDoctorError, match=r"the default grid \(no --max\).*no release of max found"):
        default_versions("max", lambda name: [], 3)


def test_offline_the_default_comes_from_the_wheelhouse_and_a_sweep_builds_it(tmp_path: Path) -> None:
    """--find-links DIR --offline with --max left out: the wheelhouse's newest MAX line, really installed by uv into
    the one cell (tiny real `max` wheels; torch inherited from this interpreter)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for release in ("91.1.0", "91.2.0", "91.2.1"):
        tiny_wheel(wheels, "max", release)
    assert release_lister([wheels], offline=True)("max") == [Version(v) for v in ("91.1.0", "91.2.0", "91.2.1")]
    completed = run_cli(
        "sweep", "--envs", str(tmp_path / "envs"), "--no-matrix", "--inherit", sys.executable, "--json",
        "--torch", version("torch"), "--find-links", str(wheels), "--offline", "--newest", "1", "--only", "torch-env",
        env=pip_environment((tmp_path / "no-index").as_uri()), timeout=600,
    )  # fmt: skip
    assert completed.stdout, completed.stderr[-3000:]
    (cell,) = json.loads(completed.stdout)["cells"]
    assert cell["cell"]["max"] == "91.2.1" and cell["installed"]["max"] == "91.2.1", cell
    assert "--max 91.2.1: the newest release of each of its 1 newest lines" in completed.stderr
