"""The tutorial: the style model (``style_model``: ``get_style_model_and_losses``) and the LBFGS loop (``transfer``),
the backward paths (``backward``), the image's basis (``parametrization``), the run's counters (``run_stats``), colours
and averaging. Nothing here knows about files, runs or front ends."""
