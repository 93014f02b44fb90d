"""The tutorial: the style model (``style_model``: ``get_style_model_and_losses``) and the LBFGS loop (``transfer``),
the backward paths (``backward``), what the optimiser moves (``image``: the basis, the tutorial's pixels), the run's
counters (``run_stats``), colours and averaging. Nothing here knows about files, runs or front ends."""
