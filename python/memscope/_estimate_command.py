"""``python3 -m memscope._estimate_command SCRIPT.py:FUNCTION --batch 8 --capacity 24GiB``: the
command line of memscope.estimate, which ``memscope estimate`` runs. A private name: a public
module ``memscope.estimate`` would replace the function ``memscope.estimate`` on the package
the moment anything imported it. The functions are ``memscope.estimate(...)`` and
``memscope.max_batch(...)``."""

from __future__ import annotations

import sys

from ._estimate import main

if __name__ == "__main__":
    sys.exit(main())
