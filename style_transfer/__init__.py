"""style_transfer: neural style transfer (Gatys et al.), a faithful modern port of the PyTorch tutorial."""

from .config import StyleConfig
from .errors import (ImageError, Interrupted, NonFiniteLoss, OutputError, ResourceError, RunStopped,
                     StyleTransferError, WeightsError)
from .guards import RunStats
from .images import load_image, save_image
from .losses import ContentLoss, StyleLoss, gram_matrix
from .models import Normalization, load_vgg19_features
from .transfer import (
    StepInfo,
    get_input_optimizer,
    get_style_model_and_losses,
    run_style_transfer,
    stylize,
)

__version__ = "0.1.0"

__all__ = [
    "ContentLoss",
    "ImageError",
    "Interrupted",
    "NonFiniteLoss",
    "Normalization",
    "OutputError",
    "ResourceError",
    "RunStats",
    "RunStopped",
    "StepInfo",
    "StyleConfig",
    "StyleLoss",
    "StyleTransferError",
    "WeightsError",
    "get_input_optimizer",
    "get_style_model_and_losses",
    "gram_matrix",
    "load_image",
    "load_vgg19_features",
    "run_style_transfer",
    "save_image",
    "stylize",
    "__version__",
]
