"""The probe catalog: the shipped one loads, and a malformed one is rejected naming file, entry and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.model import Device
from gpudoctor.suite.catalog import default_probe_dir, load_catalog
from gpudoctor.suite.plan import plan_runs


def test_shipped_catalog_is_valid_and_every_script_runs_standalone() -> None:
    specs = load_catalog(default_probe_dir())
    assert specs
    for spec in specs:
        source = (default_probe_dir() / spec.script).read_text()
        assert "run_probe(" in source, f"{spec.script} does not report through the harness"


def _catalog(tmp_path: Path, body: str) -> Path:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "catalog.toml").write_text(body)
    return tmp_path


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[probe]]\nscript = "a.py"\ntitle = "t"\n', "probe #1: field 'id' must be a non-empty string"),
        ('[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\ncolour = 1\n', "probe #1: unknown field 'colour'"),
        ('[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\ndevices = ["tpu"]\n', "probe #1 (a): field 'devices'"),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\nneeds = "torch"\n',
            "probe #1 (a): field 'needs' must be a list of strings",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\ntimeout_s = -1\n',
            "probe #1 (a): field 'timeout_s' must be seconds, above 0 and at most 86400",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\ntimeout_s = inf\n',
            "probe #1 (a): field 'timeout_s' must be seconds, above 0 and at most 86400",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\ntimeout_s = nan\n',
            "probe #1 (a): field 'timeout_s' must be seconds, above 0 and at most 86400",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "../a.py"\ntitle = "t"\n',
            "probe #1 (a): field 'script' must be a path inside the probe folder, not '../a.py'",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "."\ntitle = "t"\n',
            "probe #1 (a): field 'script' names '.', which is not a file",
        ),
        (
            '[[probe]]\nid = "A b"\nscript = "a.py"\ntitle = "t"\n',
            "probe #1: field 'id' must be lower-case letters, digits",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\nstage = "one"\n',
            "probe #1 (a): field 'stage': must be a whole number from 0 to 99",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\nafter = ["b"]\n',
            "probe 'a': field 'after' names unknown probe 'b'",
        ),
        (
            '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\n[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "u"\n',
            "probe id 'a' is declared twice",
        ),
        ("[[probe]\n", "not valid TOML"),
        ('probe = "x"\n', "'probe' must be an array of tables"),
    ],
)
def test_malformed_catalog_names_file_and_field(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(GpuDoctorError) as raised:
        load_catalog(_catalog(tmp_path, body))
    assert str(tmp_path / "catalog.toml") in raised.value.message
    assert message in raised.value.message


def test_prerequisite_cycle_is_an_error(tmp_path: Path) -> None:
    body = (
        '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\nafter = ["b"]\n'
        '[[probe]]\nid = "b"\nscript = "a.py"\ntitle = "t"\nafter = ["a"]\n'
    )
    specs = load_catalog(_catalog(tmp_path, body))
    with pytest.raises(GpuDoctorError, match="cycle: a -> b -> a"):
        plan_runs(specs, collect_environment(), python="python3", probe_dir=tmp_path)


def test_only_pulls_in_prerequisites_and_device_filter(synthetic_dir: Path) -> None:
    specs = load_catalog(synthetic_dir)
    plan = plan_runs(
        specs,
        collect_environment(),
        python="python3",
        probe_dir=synthetic_dir,
        only=["after-segfault"],
        devices=[Device.CPU],
    )
    assert [p.run_id for p in plan] == ["segfaults", "after-segfault"]
    assert plan[1].prerequisites == ("segfaults",)
