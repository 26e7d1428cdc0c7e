"""Entry point for ``python -m gpudoctor``.

The same program as the `gpudoctor` console script, so both spellings behave identically.
"""

import sys

from gpudoctor.program import main

sys.exit(main())
