"""``python -m stomp_proto``: see :mod:`stomp_proto._cli`."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
