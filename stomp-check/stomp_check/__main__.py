"""``python -m stomp_check``: the ``stomp-check`` command."""

import sys

from ._command import main

sys.exit(main())
