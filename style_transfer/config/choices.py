"""The values settings may take, named once (torch-free): the choices, default sizes and limits."""

from __future__ import annotations

# Long side of the working image when `size` is None. The tutorial uses 512 on a GPU and
# 128 on a CPU; 448 px keeps the default 300 steps to a few minutes on 2 CPU cores (docs/speed.md).
GPU_DEFAULT_SIZE = 512
CPU_DEFAULT_SIZE = 448
# A print: from PRINT_SIZE px up a run given no --scales, --min-size or --scale-steps is coarse-to-fine from
# COMPOSITION_SIZE, a size at which VGG's style layers see a painting's forms whole (at 1,024 px and one size they see
# brush texture only: docs/print-size.md); each larger size refines the one before with LATER_SHARE of --steps.
COMPOSITION_SIZE = 512
PRINT_SIZE = 2 * COMPOSITION_SIZE
LATER_SHARE = 0.2

INITS = ("content", "noise", "style")  # or the path of an image file
PRESERVE_COLORS = ("none", "luminance", "histogram")
OPTIMIZERS = ("lbfgs", "adam")
# How the losses are backpropagated: one backward of their sum (today's tutorial), or one
# backward per loss module with the graph retained (the 2017 tutorial); see docs/retain_graph.md.
BACKWARDS = ("combined", "per-module")
# What the weights expect of an image in [0, 1] (networks.vgg.make_normalization; named here so config needs no torch).
PREPROCESSINGS = ("torchvision", "caffe", "caffe256")
PRECISIONS = ("fp32", "bf16")
# What the optimiser moves: the image's pixels (the tutorial's) or its scaled Fourier coefficients (fast/basis.py).
PARAMETRIZATIONS = ("pixels", "fourier")
MIN_SIZE = 16  # px, of size, min_size and the working sizes
MIN_TILE = 16  # px; the layers used may need more (crops.Geometry.minimum_tile: 26 px for the tutorial's)

# Why tiling (docs/print-size.md) cannot run a style loss (the Gram's and W2's tile; config and
# tiling.plans.plan_tiles say it).
TILING_REFUSAL = {
    "sliced": "the sliced loss sorts the projections of every position of a feature map at once, which crops "
              "cannot split (use style_loss gram, or a size that fits)",
}
