"""Entry point for ``python -m gpudoctor``.

Delegates to the CLI so that both spellings behave identically.
"""

import sys

from gpudoctor.cli import main

sys.exit(main())
