"""The tutorial's losses where they were before the package was split into layers: now ``core.losses``."""

from .core.losses import ContentLoss, StyleLoss, backward_weighted, gram_matrix  # noqa: F401
