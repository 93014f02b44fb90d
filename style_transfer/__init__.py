"""style_transfer: neural style transfer (Gatys et al.), a faithful modern port of the PyTorch tutorial."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it. The names are imported on first use (PEP 562), so
# that `import style_transfer.cli` does not import torch: `stylize --help`, `--version` and option
# errors answer in a fraction of a second. `from style_transfer import stylize` works as before.
_EXPORTS = {
    "StyleConfig": "config.style", "RunOptions": "config.run_options",
    "ImageError": "errors", "Interrupted": "errors", "NonFiniteLoss": "errors", "OutputError": "errors",
    "ResourceError": "errors", "RunStopped": "errors", "StyleTransferError": "errors", "WeightsError": "errors",
    "RunStats": "core.run_stats",
    "load_image": "io.images", "save_image": "io.images",
    "ContentLoss": "losses.tutorial", "StyleLoss": "losses.tutorial", "gram_matrix": "losses.tutorial",
    "Network": "networks.vgg", "Normalization": "networks.vgg", "load_network": "networks.vgg",
    "load_vgg19_features": "networks.vgg",
    "StepInfo": "core.transfer", "get_input_optimizer": "core.transfer",
    "get_style_model_and_losses": "core.style_model", "run_style_transfer": "core.transfer",
    "TransferSettings": "core.transfer",
    "Run": "run.run", "RunResult": "run", "Unfinished": "run", "stylize": "run.run",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'style_transfer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from .config.run_options import RunOptions
    from .config.style import StyleConfig
    from .errors import (ImageError, Interrupted, NonFiniteLoss, OutputError, ResourceError, RunStopped,
                         StyleTransferError, WeightsError)
    from .core.run_stats import RunStats
    from .io.images import load_image, save_image
    from .losses.tutorial import ContentLoss, StyleLoss, gram_matrix
    from .networks.vgg import Network, Normalization, load_network, load_vgg19_features
    from .core.style_model import get_style_model_and_losses
    from .core.transfer import StepInfo, TransferSettings, get_input_optimizer, run_style_transfer
    from .run import RunResult, Unfinished
    from .run.run import Run, stylize
