"""``python3 -m memscope.estimate SCRIPT.py:FUNCTION --batch 8 --capacity 24GiB``: the command
line of memscope.estimate (``memscope estimate`` runs it). The functions are in the package:
``memscope.estimate(...)``, ``memscope.max_batch(...)``."""

from __future__ import annotations

import sys

from ._estimate import main

if __name__ == "__main__":
    sys.exit(main())
