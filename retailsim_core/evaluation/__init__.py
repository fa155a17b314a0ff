"""The evaluation: every method on the same held-out baskets, told only what it may know.

One entry point, ``retailsim_core.pipeline.evaluation_run.evaluate``: it reads the warehouse
once and runs the two halves of ``protocol``, whose docstring lists the stages (tasks → tuning →
scorers → scoring → summary → price checks → report), one module each. The baselines are in
``retailsim_core.baselines`` and ``oracle_scorers``; per-basket metrics in
``retailsim_core.training.metrics`` (validation shares them); the HTML in ``report_html`` and
``svg_charts``. Nothing here reads the warehouse.
"""
