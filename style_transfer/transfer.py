"""The tutorial's names where they were before the package was split into layers (``docs/api.md``, "What moved").

The style model and the LBFGS loop are in ``core.transfer``; the run-level helpers in ``run.prepare``; ``stylize``
in ``run.run``. New code imports from there.
"""

from .core.transfer import (OPTIMIZER_LR, ProgressCallback, Resume, StepEndCallback, StepInfo,  # noqa: F401
                            get_input_optimizer, get_style_model_and_losses, layer_names, optimize,
                            run_style_transfer)
from .run.prepare import (default_size, fit_to, initial_image, prepare_colors, resolve_device,  # noqa: F401
                          sizes_from, style_size, working_sizes)
from .run.run import stylize  # noqa: F401
