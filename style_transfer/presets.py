"""Presets: named sets of defaults for the settings that define the algorithm.

``tutorial`` (the default) is the PyTorch tutorial; ``paper`` is Gatys, Ecker and Bethge,
"Image Style Transfer Using Convolutional Neural Networks" (CVPR 2016). A preset only fills
the settings left unset (``None``) in a ``StyleConfig``: an explicit value always wins.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

# Loss definitions: the tutorial's (mse of Grams normalised by N*M; mse of features) or the
# paper's (E_l = sum (G - A)^2 / (4 N^2 M^2); 1/2 sum (F - P)^2).
LOSS_FORMS = ("tutorial", "paper")
# Style statistics (docs/style-controls.md; losses/statistics.py): the tutorial's Gram matrices, the Wasserstein-2
# distance of the features' Gaussian fits, or the sliced Wasserstein distance of their distributions.
STYLE_LOSSES = ("gram", "wasserstein", "sliced")

# The tutorial's layers: content after conv_4, style after conv_1 .. conv_5.
TUTORIAL_CONTENT_LAYERS: tuple[str, ...] = ("conv_4",)
TUTORIAL_STYLE_LAYERS: tuple[str, ...] = ("conv_1", "conv_2", "conv_3", "conv_4", "conv_5")

# The tutorial preset's style weight at Caffe's 0-255 input scale (CAFFE_WEIGHTS below), for VGG16; VGG19's is
# CAFFE_TUTORIAL_STYLE_WEIGHTS["vgg19"] (the networks' first layers differ in scale, so each was looked at).
CAFFE_TUTORIAL_STYLE_WEIGHT = 300.0

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "tutorial": MappingProxyType({
        "content_layers": TUTORIAL_CONTENT_LAYERS,
        "style_layers": TUTORIAL_STYLE_LAYERS,
        "style_layer_weights": "one",
        "style_weight": 1e6,
        "content_weight": 1.0,
        "pooling": "max",
        "loss_form": "tutorial",
    }),
    "paper": MappingProxyType({
        "content_layers": ("conv4_2",),
        "style_layers": ("conv1_1", "conv2_1", "conv3_1", "conv4_1", "conv5_1"),
        "style_layer_weights": "mean",  # w_l = 1/5 for each of the five layers
        # alpha / beta = 1e-3. The paper's VGG took [0, 255] caffe inputs; torchvision's takes
        # [0, 1] normalised by ImageNet's std, which shrinks features ~58x and so shifts the
        # balance: with those weights more style than the paper's ratio gives may be wanted.
        "style_weight": 1e3,
        "content_weight": 1.0,
        "pooling": "avg",
        "loss_form": "paper",
    }),
})

PRESET_NAMES = tuple(PRESETS)

# Loss weights for weights that take Caffe's 0-255 input (preprocess caffe, caffe256), where they differ from
# the above: features about 58x larger make the quartic style term outgrow the quadratic content term by about 3400x,
# and 1e6 / 3400 is about 300, chosen by looking at the pictures (benchmarks/NOTEBOOK.md, "The preset's loss weights").
# The paper's alpha/beta = 1e-3 was set on Caffe's VGG, so the paper preset keeps its own.
CAFFE_WEIGHTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "tutorial": MappingProxyType({"style_weight": CAFFE_TUTORIAL_STYLE_WEIGHT, "content_weight": 1.0}),
})
# The tutorial preset's Caffe-scale style weight per network: the original VGG19 at 1000 paints as VGG16 does at 300
# (docs/gallery.md, "VGG19's style weight").
CAFFE_TUTORIAL_STYLE_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "vgg16": CAFFE_TUTORIAL_STYLE_WEIGHT,
    "vgg19": 1000.0,
})


# The style weights of the other style losses (losses/statistics.py), per preset. Both are quadratic in the features,
# as the content loss is, so one weight serves every input scale; 100 looks like the Gram preset's 300, the paper's
# 1e8 is computed, not judged by pictures (the notebook entry named above).
STYLE_LOSS_WEIGHTS: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "wasserstein": MappingProxyType({"tutorial": 100.0, "paper": 1e8}),
    "sliced": MappingProxyType({"tutorial": 100.0, "paper": 1e8}),
})


def preset_values(name: str, preprocess: str = "torchvision", style_loss: str = "gram",
                  model: str = "vgg19") -> Mapping[str, Any]:
    """The settings of a preset, with the loss weights for the input scale of ``preprocess``, ``style_loss`` and,
    at Caffe's scale, the network ``model``.

    Raises:
        ValueError: an unknown preset name.
    """
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESET_NAMES)}, got {name!r}")
    if style_loss in STYLE_LOSS_WEIGHTS:  # quadratic in the features: one weight for every input scale
        return MappingProxyType({**PRESETS[name], "style_weight": STYLE_LOSS_WEIGHTS[style_loss][name]})
    if preprocess.startswith("caffe") and name in CAFFE_WEIGHTS:
        values = {**PRESETS[name], **CAFFE_WEIGHTS[name]}
        if name == "tutorial":
            values["style_weight"] = CAFFE_TUTORIAL_STYLE_WEIGHTS.get(model, CAFFE_TUTORIAL_STYLE_WEIGHT)
        return MappingProxyType(values)
    return PRESETS[name]


def layer_weights(rule: str, count: int) -> tuple[float, ...]:
    """Per-layer style weights for ``count`` layers under a weighting rule (``one`` or ``mean``)."""
    if rule == "one":
        return (1.0,) * count
    return (1.0 / count,) * count if count else ()
