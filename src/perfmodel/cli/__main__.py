"""``python -m perfmodel.cli``: the same as ``perfmodel`` (and ``python -m perfmodel``)."""

import sys

from . import main

sys.exit(main())
