# The mistakes users make calling a correct custom op through CustomOpLibrary, one call each (tests/call_checks/ops).
# On MAX 26.7's CPU path the float64 input, the rank-3 input and the int32 output end in "RuntimeError: Failed to
# compile the model. Please file an issue, all models should be correct by construction", the missing parameter in
# another compile error, and the output larger than its input returns garbage without an error. Each call is caught so
# that one process makes them all; `python mistakes.py NAME ...` makes only those, and `--last-fails` lets the last
# one's error end the program, as it would in a user's script.
import sys
from pathlib import Path

import torch

try:
    from max.torch import CustomOpLibrary
except ModuleNotFoundError:  # MAX 26.2 and later moved the bridge
    from max.experimental.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent / "ops")
x = torch.ones(4, 4)
out = torch.empty(4, 4)

MISTAKES = {
    "correct": lambda: ops.plus_one(out, x),
    "float64-input": lambda: ops.plus_one(out, x.double()),
    "rank3-input": lambda: ops.plus_one(out, torch.ones(4, 4, 1)),
    "int32-output": lambda: ops.plus_one(torch.empty(4, 4, dtype=torch.int32), x),
    "output-larger": lambda: ops.plus_one(torch.empty(64, 64), x),
    "missing-parameter": lambda: ops.times(out, x),
    "one-argument": lambda: ops.plus_one(out),
    "refuses": lambda: ops.refuses(out, x),
}
wanted = [a for a in sys.argv[1:] if not a.startswith("--")] or list(MISTAKES)
for name in wanted:
    try:
        MISTAKES[name]()
    except Exception as error:
        print(f"{name}: {type(error).__name__}: {str(error)[:160]}", flush=True)
        if "--last-fails" in sys.argv and name == wanted[-1]:
            raise
    else:
        print(f"{name}: returned", flush=True)
