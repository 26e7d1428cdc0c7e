"""`python -m gpudoctor.calls`: the folder to put first on PYTHONPATH for the call checks' start-up hook, e.g.
``PYTHONPATH=$(python -m gpudoctor.calls) GPUDOCTOR_CALL_CHECKS=raise python prog.py``."""

from gpudoctor.calls.channel import HOOK_DIR

print(HOOK_DIR)
