"""One run: ``Run`` (sizes, events, previews, checkpoints) and ``stylize()`` (``run``), its inputs made ready
(``prepare``), sizes and budgets worked out without torch (``plans``), saved and resumed state (``checkpoints``), the
loop's settings for a config (``settings``), the backward paths compared (``compare``)."""
