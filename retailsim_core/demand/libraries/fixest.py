"""pyfixest, imported where a fit needs it, with its demeaner on one thread.

pyfixest's Rust demeaner sums in parallel (rayon), so the order of its additions, and a fit's
last bits with them, change from run to run; one thread makes the same data give the same
bytes. Rayon reads the setting when its pool starts, at the first fit of the process, so it is
set here before any: the checks import pyfixest only through this function.
"""

from __future__ import annotations

import os


def pyfixest():
    """The ``pyfixest`` module, its demeaner pool limited to one thread."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    import pyfixest as pf  # heavy import: only the demand checks need it

    return pf
