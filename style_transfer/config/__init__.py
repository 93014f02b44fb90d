"""The settings of a run, torch-free: ``StyleConfig`` (each setting declared once, with how it is given and
shown: ``fields``), its checks (``checks``), the one text parser (``text``), the choices (``choices``), what
weights files tell (``weights``) and ``RunOptions``."""

from .choices import (BACKWARDS, CPU_DEFAULT_SIZE, FAST_SCALES, GPU_DEFAULT_SIZE, INITS, LOSS_FORMS,  # noqa: F401
                      MIN_SIZE, MIN_TILE, MODELS, OPTIMIZERS, PARAMETRIZATIONS, POOLINGS, PRECISIONS, PREPROCESSINGS, PRESERVE_COLORS,
                      PRESET_NAMES, STYLE_LOSSES, TILING_REFUSAL)
from .fields import SECTIONS, Setting, settings  # noqa: F401
from .run_options import RunOptions  # noqa: F401
from .style import StyleConfig  # noqa: F401
from .weights import CAFFE256_FILES, preprocess_by_name  # noqa: F401
from ..presets import TUTORIAL_CONTENT_LAYERS, TUTORIAL_STYLE_LAYERS  # noqa: F401
