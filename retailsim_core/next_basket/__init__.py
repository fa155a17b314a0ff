"""Next-basket evaluation: every method on the same held-out baskets, told only what it may know.

``retailsim_core.evaluation.protocol`` runs it (tasks → tuning → methods → scoring → summary); the
baselines are in ``retailsim_core.baselines`` and the generator's ceilings in
``oracle_scorers``; per-basket metrics in ``retailsim_core.training.scoring.metrics`` (validation
shares them). Nothing here reads the warehouse: ``retailsim_core.pipeline`` hands it values.
"""
