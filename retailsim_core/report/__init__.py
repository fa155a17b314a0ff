"""The evaluation report: its files (``files``), the self-contained HTML page (``html``, with
``price_sections`` and ``svg_charts``) and its Markdown twin."""
