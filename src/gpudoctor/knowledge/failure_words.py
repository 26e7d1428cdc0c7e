"""The words by which a line of any tool's output, or a person's sentence quoting it, says that something failed:
read by `explain` to find a pasted text's error lines (reproducer.log) and the lines a public report is matched by
(knowledge.public)."""

from __future__ import annotations

import re

ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)|(?:Error|Exception)\b|\b[Ee]rror\b|\b[Ff]atal\b|FAILED|Segmentation fault|"
    r"Aborted|Assertion|CUDA_ERROR_|cudaError|core dumped|"
    # failures in their own tools' words, with no "error" in the line (issue 51): compute-sanitizer's records, the
    # kernel log's Xid and GSP lines, a driver module that would not load, a compiler's constraint or crash, a build
    r"Invalid __(?:global|shared|local)__ (?:read|write|atomic)|Uninitialized __global__ memory|Race reported between|"
    r"Barrier error detected|NVRM: Xid|\bXid \(PCI|GSP[\w -]*(?:timeout|error|fault|crash|failed)|cannot proceed with|"
    r"RmInitAdapter failed|"
    r"init module failed|NVRM: .*failed|constraint failed|crashed! Please file a bug report|ninja: build stopped|"
    r"make(?:\[\d+\])?: \*\*\*|subprocess-exited-with-error|undefined reference to|collect2: .*returned|"
    r"crashed!|PLEASE submit a bug report|Stack dump:|not a recognized processor|"
    r"couldn't communicate with the NVIDIA driver|Unknown attribute '|\.(?:dll|so[.\d]*) [-=]> not found|"
    r"library not found for -l|(?m:^)#\d+\s+0x[0-9a-fA-F]+ in |UNREACHABLE executed|"
    # the kernel's own report of a crash in a module (an oops), and a compiler's "identifier ... is undefined"
    r"---\[ end trace [0-9a-f]+ \]---|\bRIP: [0-9a-f]{4}:\S+\+0x|\bBUG: unable to handle|\bOops: |\bis undefined\b|"
    # Windows' access violation, as a process's exit code says it (the signal a crash is there)
    r"0xC0000005|-1073741819|ACCESS_VIOLATION|(?i:\baccess violation\b)|"
    # a package manager's own exception name (conda's ResolvePackageNotFound), a library's "install X to use Y"
    r"\b[A-Z]\w*NotFound\b|\b[Ii]nstall [\w.-]+ to (?:use|enable|run)\b|"
    # a failure said in prose, without "error" (a title, a sentence quoting it): never "no failure"
    r"(?i:\bcannot (?:find|open|load|locate|import)\b|\bcan't (?:find|open|load)\b|"
    r"\bunable to (?:find|locate|load|open)\b|\bnot found\b|\bhas no attribute\b|\bno available kernel\b|\bOOM\b|"
    r"\bout of memory\b|\bsegfault|\bsegmentation fault\b|\bcrash(?:es|ed)?\b|\bDLL load failed\b|\braises\b|"
    r"\bunsupported\b|\bunknown (?:\w+ )?(?:datatype|dtype|type|option|argument)\b)|(?m:^)\s*assert\s"
)


# The words of a failure in any tool's or person's wording: a text pasted to be explained that says none of them has
# no failure in it ("no failure found"); one that says any is answered, at worst with the generic answer. Kept broad on
# purpose (issue 51: titles, prose and tools' own words read as "no failure" on every fresh set); a warning alone is
# not a failure.
_SAYS_FAILURE = re.compile(
    r"(?i)\b(?:fail\w*|errors?|exception|fault\w*|abort\w*|crash\w*|cannot|can't|couldn't|could not|unable|"
    r"not found|no such|missing|unknown|unsupported|not supported|invalid|denied|refused|timed? ?out|"
    r"out ?of ?(?:memory|resources?)|killed|hangs?|hung|stuck|deadlock\w*|mismatch\w*|incompatible|illegal|corrupt\w*|"
    r"overflow|panic\w*|terminated|not (?:available|detected|recognized|installed|a valid)|found no|no \w+ (?:found|"
    r"available|detected)|no (?:\w+ ){1,2}(?:found|available|detected)|does not exist|doesn't exist|must be|"
    r"(?:is|are) required|undefined (?:symbol|reference)|not compiled with|received signal|no valid|vendor err)\b"
    r"|报错|错误|失败|エラー"  # "error", "failed" in Chinese and Japanese (a title in the reporter's language)
    r"|(?m:^)[EF]\d{4} \d\d:\d\d:\d\d"  # a glog/absl ERROR or FATAL line (torch's C++ and Inductor log these)
)


def reads_as_failure(text: str) -> bool:
    """Whether some line of ``text`` reads as a failure: an error line (a traceback, an exception, "error", "fatal", a
    signal, a tool's own words), or a failure's words anywhere in it."""
    return ERROR_LINE.search(text) is not None or _SAYS_FAILURE.search(text) is not None
