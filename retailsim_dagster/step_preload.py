"""Imported last by the step forkserver (``definitions.STEP_IMPORTS``), and only there.

Every step forks from the forkserver once it has imported the definitions (torch, DGL, Polars,
Dagster: ~550K objects). Frozen out of the cyclic collector here, those objects are never
walked by a step's collections, which would touch (and copy) every inherited page's object
headers, costing a step CPU it never needed (D105, D106). A step's own
objects are collected as usual.
"""

import gc

gc.freeze()
