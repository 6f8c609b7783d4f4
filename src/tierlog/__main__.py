"""``python -m tierlog``: same as the ``tierlog`` console script."""

import sys

from tierlog.cli import main

sys.exit(main())
