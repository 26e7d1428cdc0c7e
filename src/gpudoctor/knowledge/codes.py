"""Numbers a failure's text gives without their words (``codes.toml``): the NVIDIA driver's Xid codes in a kernel log,
each said with what it means and who is usually at fault, and a CUDA status printed as a bare number ("cuda runtime
error (100)", "Code: 209"), named — in the numbering of the reporter's CUDA where the text gives it (CUDA 10.0 and
before numbered the runtime's statuses apart), both where it does not and the two differ. A pure function of the text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.tomlcheck import parse_toml

CODES = Path(__file__).with_name("codes.toml")
BY_ORDER = ("hardware", "driver", "application", "consequence")  # whose fault to look at first
_BY_WORDS = {"hardware": "the GPU's hardware or platform", "driver": "the driver or its firmware",
             "application": "the program that ran", "consequence": "an earlier error"}  # fmt: skip
_XID = re.compile(r"NVRM: Xid \([^)]*\): (?P<code>\d+)(?:, pid=(?P<pid>[^,\s]+))?(?:, name=(?P<name>[^,\s]+))?")
# A CUDA status as a bare number, in the forms libraries print it
_STATUS = re.compile(
    r"(?i:cuda runtime error ?)\((?P<a>\d+)\)|\bTHCudaCheck FAIL\b[^\n]*\berror=(?P<b>\d+)"
    r"|Error \[CUDA\]: Code: (?P<c>\d+)"
    r"|\bCUDA (?:driver )?error(?: code)?[ :=]+(?P<d>\d+)\b|\bcudaError(?:_t)? (?P<e>\d+)\b"
)
LEGACY_UNTIL = (10, 0)  # the last CUDA release of the old runtime numbering


@dataclass(frozen=True)
class Xid:
    code: int
    name: str
    means: str
    by: str
    next: str


@dataclass(frozen=True)
class Status:
    code: int
    api: str
    name: str
    kind: str | None = None


@dataclass(frozen=True)
class Codes:
    xids: dict[int, Xid]
    statuses: dict[tuple[str, int], Status]


@functools.cache
def load_codes(path: Path = CODES) -> Codes:
    data = parse_toml(path, path.read_text(encoding="utf-8"))
    xids = {int(x["code"]): Xid(int(x["code"]), x["name"], x["means"], x["by"], x["next"]) for x in data["xid"]}
    wrong = next((x for x in xids.values() if x.by not in BY_ORDER), None)
    if wrong is not None:  # read by index below: a value outside them would fail on a user's log, not here
        raise GpuDoctorError(f"{path}: xid {wrong.code}: 'by' must be one of {', '.join(BY_ORDER)}, not {wrong.by!r}")
    statuses = {(s["api"], int(s["code"])): Status(int(s["code"]), s["api"], s["name"], s.get("kind"))
                for s in data["status"]}  # fmt: skip
    return Codes(xids, statuses)


def xid_values(text: str, codes: Codes | None = None) -> dict[str, str]:
    """{xids}: every Xid of the text in the order first logged, with how often, what it means and the process it
    names; {xid_next}: the action for the one to look at first (hardware before the driver before the program, an
    earlier error before its consequences). Empty where the text logs none."""
    codes = codes or load_codes()
    seen: dict[int, tuple[int, set[str]]] = {}
    for found in _XID.finditer(text):
        code = int(found["code"])
        count, names = seen.get(code, (0, set()))
        if found["name"] and found["name"] not in ("<unknown>", "'<unknown>'"):
            names.add(found["name"])
        seen[code] = (count + 1, names)
    if not seen:
        return {}
    said = []
    for code, (count, names) in seen.items():
        times = f" x{count}" if count > 1 else ""
        process = f" (process {', '.join(sorted(names))})" if names else ""
        entry = codes.xids.get(code)
        unknown = "not in gpudoctor's table (NVIDIA's Xid catalog names it)"
        said.append(f"Xid {code}{times}{process}: " + (f"{entry.name} — {entry.means}" if entry else unknown))
    known = [codes.xids[c] for c in seen if c in codes.xids]
    first = min(known, key=lambda x: BY_ORDER.index(x.by), default=None)
    if first is None:
        step = "the Xid codes in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors), then nvidia-smi -q"
    else:
        step = f"Xid {first.code} first ({_BY_WORDS[first.by]}): {first.next}"
    return {"xids": "; ".join(said), "xid_next": step}


def _version(text: str | None) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(found[1]), int(found[2])) if found else None


def bare_status(text: str, cuda: str | None = None, torch: str | None = None,
                codes: Codes | None = None) -> tuple[str, str | None] | None:  # fmt: skip
    """The last CUDA status the text gives as a bare number: what it is named (in the reporter's CUDA numbering where
    ``cuda`` or ``torch`` tells it, else both where they differ), and the vocabulary kind it means, where one."""
    codes = codes or load_codes()
    found = None
    for found in _STATUS.finditer(text):  # noqa: B007 - the last one
        pass
    if found is None:
        return None
    code = int(next(g for g in found.groups() if g))
    new, old = codes.statuses.get(("runtime", code)), codes.statuses.get(("legacy", code))
    runtime, torch_release = _version(cuda), _version(torch)
    legacy: bool | None = None  # which numbering: the reporter's CUDA tells, else a torch older than CUDA 10.1's
    if runtime is not None:
        legacy = runtime <= LEGACY_UNTIL
    elif torch_release is not None and torch_release < (1, 1):
        legacy = True
    elif new is not None and old is not None and old.name.split()[0] != new.name.split()[0]:
        return (f"CUDA status {code} is {new.name} as CUDA 10.1 and later number it, {old.name} in CUDA 10.0 and "
                "before (the log gives no CUDA release to tell which)", None)  # fmt: skip
    else:
        legacy = new is None and old is not None
    chosen = old if legacy else new
    if chosen is None:
        numbering = "10.0 and before" if legacy else "10.1 and later"
        return (f"CUDA status {code} (not in gpudoctor's table for CUDA {numbering})", None)
    numbering = "CUDA 10.0 and before" if legacy else "CUDA 10.1 and later"
    return (f"CUDA status {code} is {chosen.name} (as {numbering} number it)", chosen.kind)
