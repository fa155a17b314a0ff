"""The evaluation: every method on the same held-out baskets, told only what it may know.

One entry point, :func:`retailsim_core.evaluation.protocol.evaluate`; its docstring lists the
stages (tasks → tuning → scorers → scoring → summary → price checks → report), one module each.
The methods are in ``baselines``, ``sequential`` and ``oracle_scorers``; per-basket metrics in
``metrics``; the HTML in ``report_html`` and ``svg_charts``.
"""
