"""One run as an object: an event after each evaluation, previews, cancellation, checkpoints and resume.

``Run`` is what every front end drives (the command, and the web app, batch and video to come):

    run = Run("photo.jpg", "style.jpg", StyleConfig(size=256), RunOptions(preview_every=20))
    result = run.execute(on_event)   # on_event(StepInfo) after every evaluation; run.cancel() from any thread
    result.image.save("out.png")     # result.record: the provenance record for every file the run writes

It runs the tutorial's loop (``transfer.run_style_transfer``) once per working size (coarse-to-fine
runs several, smallest first) and changes none of its numbers: ``stylize()`` is a ``Run`` without
options and gives the image it always gave.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from PIL import Image

from ..core import colors
from ..losses import masks
from ..io import provenance
from ..io.files import shown
from ..tiling import tiling
from ..tiling.plans import plan_tiles, tiled_speed
from ..config.run_options import RunOptions
from ..config.checks import filled
from ..config.style import StyleConfig
from ..errors import ImageError, Interrupted, NonFiniteLoss
from ..fast.fast import Speed, accelerator, speed_from_config
from ..core.run_stats import RunStats
from ..memory import SizeFn, out_of_memory
from ..io.images import ImageSource, header_size, load_image, load_style, tensor_to_pil
from ..losses.terms import normalized_blend
from ..networks.download import DownloadProgress
from ..networks.vgg import IMAGENET_MEAN, IMAGENET_STD, Network, load_network
from ..core.averaging import IterateAverage
from .plans import plan_run, scale_sizes
from ..networks.download import Notice, resolve_weights
from ..core.transfer import ProgressCallback, Resume, StepInfo, run_style_transfer
from .checkpoints import _Checkpoints, _fingerprint
from .settings import transfer_settings
from .prepare import fit_to, default_size, initial_image, prepare_colors, resolve_device, sizes_from, style_size

EventCallback = Callable[[StepInfo], None]


# Why a run ended (RunResult.stopped): it ran its evaluations; LBFGS converged; a cancel() (the web app's
# button, the command's Ctrl-C and SIGTERM pass their own reason); the loss stopped improving (plateau).
STOP_REASONS = ("done", "converged", "cancelled", "interrupted", "terminated", "plateau")


@dataclass
class RunResult:
    """What a run made: the image (final colours and alpha) and how it went."""

    image: Image.Image
    evaluations: int  # closure evaluations run (resumed runs: counted from the start)
    stopped: str  # one of STOP_REASONS
    losses: dict[str, float]  # the weighted terms of the image handed back (the last evaluation's, or kept's)
    seconds: float  # time spent optimising (resumed runs: the earlier part included)
    record: dict[str, Any] = field(repr=False)  # provenance.make_record: embed it in every file written
    kept: int | None = None  # the evaluation whose image was handed back, its lowest loss (Run's keep_best); None: the last
    start_loss: float | None = None  # the loss of the last size's first evaluation (its start image)

    @property
    def ended_above_start(self) -> bool:
        """The image handed back scores worse than the start did: LBFGS diverged, the picture is probably noise."""
        return self.start_loss is not None and self.losses.get("loss", 0.0) > self.start_loss


class Run:
    """One style transfer run: ``execute()`` it once; ``cancel()`` it from any thread.

    Args:
        content, style: file paths, Pillow images or ``(1, 3, H, W)`` tensors in [0, 1]; ``style``
            may be a list (several styles, blended by ``config.style_blend``).
        config: every setting that shapes the image; ``StyleConfig()`` (the tutorial's) when None.
        options: previews and checkpoints (``RunOptions``).
        download_progress: called while the pretrained weights download (first run only).
        init: a ``(1, 3, H, W)`` start image in [0, 1] in place of ``config.init`` (stretched to the working
            size; video/ passes the previous frame's warped result). image_losses: loss modules on the image
            (``run_style_transfer``). cnn: the network already loaded with ``config.model`` and ``networks.weights``
            (a ``networks.vgg.Network``; a bare ``features`` block is taken to expect ``config.preprocess`` or
            torchvision's), reused across runs (video/ and batch/ load it once; never changed).
        style_targets: a cache of Gram targets shared by runs (batch), keyed by ``style_targets_key``;
            a run reuses the targets found there and adds those it computes. None: no cache.
        on_notice: told, in one line, what a user should know that is not an error: the run took the original
            VGG19 because torchvision's weights could not be downloaded (``download.resolve_weights``; ``config``
            then becomes the settings the run used).
        keep_best: hand back each size's best evaluated image (``optimize``'s ``keep_best``; video/ gives 0); None:
            the loop's own choice (the tutorial's last update on the pixels, the best within 5 % in the Fourier basis).
        on_stage: told, in one line, what the run starts before its first evaluation, which may take seconds:
            ``"loading VGG19 weights (imagenet)"`` (not when ``cnn`` is given), then ``"building the model at
            256x170"`` (the first working size: the model, the style targets, the first evaluation).
    """

    def __init__(self, content: ImageSource, style: ImageSource | Sequence[ImageSource],
                 config: StyleConfig | None = None, options: RunOptions | None = None, *,
                 download_progress: DownloadProgress | None = None, init: torch.Tensor | None = None,
                 image_losses: Sequence[torch.nn.Module] = (), cnn: Network | torch.nn.Module | None = None,
                 style_targets: MutableMapping[Any, dict[str, torch.Tensor]] | None = None,
                 on_notice: Notice | None = None, on_stage: Notice | None = None,
                 keep_best: float | None = None) -> None:
        self.init, self.image_losses, self.cnn = init, tuple(image_losses), cnn  # video/, batch/: see above
        self.keep_best = keep_best
        self.content = content
        # A list or tuple holds sources; anything else (a str path too, a Sequence to mypy) is one source.
        self.styles = cast(list[ImageSource], list(style) if isinstance(style, (list, tuple)) else [style])
        self.config = config or StyleConfig()
        self.options = options or RunOptions()
        self.download_progress = download_progress
        self.style_targets = style_targets
        self.on_notice = on_notice
        self.on_stage = on_stage
        self._stop = threading.Event()
        self._reason = "cancelled"
        self._device: torch.device | None = None
        self._preprocess: str | None = None  # the preprocessing the loaded network expects, once known
        self._stats: RunStats | None = None  # the running one, once execute began (the record names its rescues)

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run at the end of the evaluation under way; ``execute`` returns its image then.

        Thread-safe, and safe from a signal handler. ``reason`` becomes ``RunResult.stopped``.
        """
        if reason not in STOP_REASONS:
            raise ValueError(f"reason must be one of {', '.join(STOP_REASONS)}, got {reason!r}")
        self._reason = reason
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def execute(self, on_event: EventCallback | None = None, *, stats: RunStats | None = None) -> RunResult:
        """Run to the end (or the cancel), calling ``on_event`` after every closure evaluation.

        Raises:
            ImageError, WeightsError, CheckpointError, ValueError: bad inputs, weights, checkpoint or
                settings, before any evaluation. ResourceError: the size cannot fit, or ran out of memory.
            NonFiniteLoss: the loss became NaN or infinite (it carries the last good image; a checkpoint,
                when asked for, holds the last good state). Interrupted: a KeyboardInterrupt (the same).
        """
        try:
            return self._execute(on_event, stats if stats is not None else RunStats())
        except (RuntimeError, MemoryError) as exc:
            device = resolve_device(self.config.device)
            error = out_of_memory(exc, self.config.size or default_size(device), device, self.config.tile)
            if error is None:
                raise
            raise error from None

    def record(self, evaluations: int, stopped: str, losses: dict[str, float], seconds: float,
               kept: int | None = None) -> dict[str, Any]:
        """The provenance record of an image of this run (``provenance.make_record``); ``kept``: the evaluation
        whose image the run handed back, where not its last (``RunResult.kept``); with the evaluations after which a
        failed LBFGS step was rescued (``RunStats.rescued_at``), where any was."""
        device = self._device or resolve_device(self.config.device)
        config = self.config  # the record names the preprocessing the weights told (replay passes it back)
        if config.preprocess is None and self._preprocess is not None:
            config = dataclasses.replace(config, preprocess=self._preprocess)
        return provenance.make_record(config, content=self.content, styles=self.styles,
                                      weights=config.weights, device=str(device), evaluations=evaluations,
                                      losses=losses, seconds=seconds, stopped=stopped, kept=kept,
                                      rescued_at=self._stats.rescued_at if self._stats is not None else ())

    def _execute(self, on_event: EventCallback | None, stats: RunStats) -> RunResult:
        self._stats = stats
        plan = self._plan()
        config, device, keeper, saved, final = plan.config, plan.device, plan.keeper, plan.saved, plan.final
        clock = _Clock(saved.seconds if saved else 0.0)
        stats.evaluations = saved.evaluations if saved else 0
        watch = _Watch(self, plan, stats, clock, on_event)
        image: torch.Tensor | None = None
        inputs = final
        for scale, working_size in enumerate(plan.sizes):
            if saved is not None and scale < saved.scale:
                continue  # sizes the checkpointed run had finished
            previous = inputs
            inputs = final if scale == len(plan.sizes) - 1 else _Inputs(self.content, self.styles, config,
                                                                          working_size, device, plan.size)
            resume = None
            watch.start_size(scale, inputs)
            if saved is not None and scale == saved.scale:  # a checkpoint at a size's start holds no optimiser
                image = saved.image.to(device)
                resume = Resume(saved.optimizer, saved.evaluations_in_scale) if saved.optimizer else None
                if watch.averager is not None and saved.average is not None:
                    watch.averager.load_state_dict(saved.average, device)
            elif image is None:
                image = inputs.start_image() if self.init is None else inputs.pad(
                    fit_to(self.init.to(device).contiguous(), inputs.picture))
            else:
                image = previous.moved_to(image, inputs)
            keeper.start_scale(scale, image, watch.done, resume, clock)
            try:
                image = self._run_size(plan, scale, inputs, image, resume, watch, stats, clock)
            except (Interrupted, NonFiniteLoss) as exc:
                return self._stopped(exc, plan, inputs, image, watch, stats, clock)
        keeper.save_if_asked()
        assert image is not None  # the last size always runs (a checkpoint's scale is one of the plan's sizes)
        stopped = "converged" if stats.converged else "done"
        kept = stats.handed_back
        return self._result(inputs.finish(image, plan.alpha), stats.evaluations, stopped,
                            watch.last if kept is None else watch.lowest, clock(), kept, watch.first.get("loss"))

    def _plan(self) -> _Plan:
        """The set-up, before any evaluation: what is wrong with the settings, sizes, images, weights or checkpoint
        fails here, cheapest first; the network is loaded last."""
        config, options = self.config, self.options
        device = self._device = resolve_device(config.device)
        size = config.size or default_size(device)
        speed = speed_from_config(config, device)  # checks bf16 support before any work
        plan = plan_run(config, size)  # the sizes, and what each runs in whole LBFGS steps (plans.py)
        normalized_blend(config.style_blend, len(self.styles))  # a blend that does not fit fails before any work
        # Each size's tile (None: untiled): config.tile, or chosen where a size does not fit untiled.
        # From the headers' sizes, before any image is read at a working size: a size that cannot fit is
        # refused in a moment, not after its images were upscaled (docs/inputs-and-errors.md).
        tiles = plan_tiles(list(plan.sizes), _header_sizes(self.content, self.styles, config), config, speed,
                                  device, styles=len(self.styles))
        # Images are read before the model loads, so a bad image fails fast.
        final = _Inputs(self.content, self.styles, config, size, device)
        alpha = colors.content_alpha(self.content, size) if config.keep_alpha else None
        if self.cnn is None:  # torchvision's VGG19 offline: the original VGG19 where installed (record, checkpoint)
            config = self.config = resolve_weights(config, download_progress=self.download_progress,
                                                   on_notice=self.on_notice)
        keeper = _Checkpoints(options, _fingerprint(config, self.content, self.styles))
        saved = keeper.load() if options.resume else None  # a checkpoint that does not fit fails before the model
        if self.cnn is None and self.on_stage is not None:
            self.on_stage(_loading_text(config))
        network = self.cnn if self.cnn is not None else load_network(
            config.model, config.weights, preprocess=config.preprocess, download_progress=self.download_progress)
        if not isinstance(network, Network):  # a bare features block (the tutorial's kind of cnn)
            # The tutorial's cnn: an nn.Sequential of convs, ReLUs and pools.
            network = Network(cast(torch.nn.Sequential, network), config.model, config.preprocess or "torchvision")
        self._preprocess = network.preprocess
        return _Plan(config, device, size, speed, tuple(plan.sizes), tuple(plan.loop_steps), plan.total, tuple(tiles),
                     final, alpha, keeper, saved, network.features.to(device), network.normalization())

    def _run_size(self, plan: _Plan, scale: int, inputs: _Inputs, image: torch.Tensor, resume: Resume | None,
                  watch: _Watch, stats: RunStats, clock: _Clock) -> torch.Tensor:
        """The tutorial's loop at one working size, from ``image``; the size's result."""
        config, keeper = plan.config, plan.keeper
        targets = None
        if self.style_targets is not None:
            key = style_targets_key(config, self.content, self.styles, inputs.styles, plan.device)
            targets = self.style_targets.get(key)
            if targets is None:
                targets = self.style_targets[key] = {}  # filled in by the model's first build
        if self.on_stage is not None and watch.first_size:  # the first size this run runs
            watch.first_size = False
            self.on_stage(f"building the model at {inputs.size[0]}x{inputs.size[1]}"
                          + (f" (size {scale + 1} of {len(plan.sizes)})" if len(plan.sizes) > 1 else ""))
        tiled = tiling.tiles_for(image, plan.tiles[scale])
        at_size = tiled_speed(plan.speed) if tiled else plan.speed  # tiled: none of the model's levers
        settings = transfer_settings(
            config, history_size=at_size.history_size, normalization=plan.normalization, guides=inputs.guides,
            image_losses=self.image_losses, style_targets=targets, progress=watch, stats=stats, resume=resume,
            on_step_end=lambda optimizer, img, n: keeper.step_end(scale, img, optimizer, n, watch.done, clock),
            two_loop=at_size.two_loop, accelerate=accelerator(at_size), tiles=tiled, keep_best=self.keep_best)
        image = run_style_transfer(
            plan.cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.transfer_content,
            inputs.styles[0] if len(inputs.styles) == 1 else inputs.styles, image, plan.budgets[scale],
            filled(config.style_weight), filled(config.content_weight), settings)
        if watch.averager is not None and watch.averager.count:  # the size's result is its average
            average = watch.averager.value()
            assert average is not None  # count > 0: it has taken an image
            image = average
        return image

    def _stopped(self, exc: Interrupted | NonFiniteLoss, plan: _Plan, inputs: _Inputs, image: torch.Tensor,
                 watch: _Watch, stats: RunStats, clock: _Clock) -> RunResult:
        """A run stopped inside the loop: its result where it was cancelled; ``exc`` again, with the picture, else."""
        plan.keeper.save()  # the state after the last whole LBFGS step, to resume from
        if watch.averager is not None and watch.averager.count:
            exc.image = watch.averager.value()
        # A run stopped at a coarse size still gives a picture of the size asked for.
        kept = None if exc.image is None else inputs.moved_to(exc.image.to(plan.device), plan.final)
        if isinstance(exc, NonFiniteLoss) or not self._stop.is_set():
            exc.image = None if kept is None else plan.final.finish_tensor(kept).cpu()
            raise exc
        result = plan.final.finish(kept if kept is not None else inputs.moved_to(image, plan.final), plan.alpha)
        return self._result(result, stats.evaluations, self._reason, watch.last, clock())

    def _result(self, image: Image.Image, evaluations: int, stopped: str, losses: dict[str, float],
                seconds: float, kept: int | None = None, start_loss: float | None = None) -> RunResult:
        return RunResult(image, evaluations, stopped, dict(losses), seconds,
                         self.record(evaluations, stopped, losses, seconds, kept), kept, start_loss)



@dataclass(frozen=True, eq=False)
class _Plan:
    """A run's set-up (``Run._plan``): settings resolved, sizes and tiles planned, inputs read, network loaded."""

    config: StyleConfig  # with the weights the run takes (resolve_weights)
    device: torch.device
    size: int  # the long side asked for
    speed: Speed
    sizes: tuple[int, ...]  # the working sizes, smallest first
    budgets: tuple[int, ...]  # each size's evaluations (plans.plan_run)
    total: int  # the evaluations the run plans in all
    tiles: tuple[int | None, ...]  # each size's tile (None: untiled)
    final: _Inputs  # the images at the last size
    alpha: Image.Image | None  # the content's alpha, put back on the result (keep_alpha)
    keeper: _Checkpoints
    saved: Any  # the checkpoint resumed from (checkpoints._Saved), or None
    cnn: torch.nn.Sequential  # the network's features block
    normalization: torch.nn.Module


class _Watch:
    """``Run``'s progress callback: after each evaluation it counts, averages the iterates, makes a preview when
    asked, keeps the losses the result reports, tells ``on_event``, stops on a plateau or a cancel."""

    def __init__(self, run: Run, plan: _Plan, stats: RunStats, clock: _Clock,
                 on_event: EventCallback | None) -> None:
        config = plan.config
        self.run, self.stats, self.clock, self.on_event = run, stats, clock, on_event
        self.total, self.scales = plan.total, len(plan.sizes)
        self.done = plan.saved.evaluations if plan.saved else 0
        self.first_size = True  # on_stage is told of the first size's model only
        self.last: dict[str, float] = {}
        self.lowest: dict[str, float] = {}  # the terms of the size's lowest loss, for a run that hands back that image
        self.first: dict[str, float] = {}  # the size's first evaluation (a resumed size: its first since the resume)
        self.plateau = plan.keeper.plateau = _Plateau(config.min_improvement, config.patience)
        # the output is the average of the iterates, restarted at each size (see _restart_average).
        self.averager = plan.keeper.averager = IterateAverage(config.average) if config.average is not None else None
        if plan.saved is not None:
            self.plateau.best = list(plan.saved.plateau)  # as it was: a resumed run stops where it would have
        self.scale, self.inputs, self.last_scale = 0, plan.final, False

    def start_size(self, scale: int, inputs: _Inputs) -> None:
        self.scale, self.inputs, self.last_scale = scale, inputs, scale == self.scales - 1
        if self.averager is not None:
            self.averager.reset()
        self.lowest.clear()
        self.first.clear()

    def _last_image(self) -> torch.Tensor:
        image = self.stats.last_image()
        assert image is not None  # progress is reported after a finite evaluation, whose image was kept
        return image

    def __call__(self, info: StepInfo) -> None:
        self.done += 1
        if self.averager is not None:
            self.averager.update(self._last_image())
        preview = None
        every = self.run.options.preview_every
        if every and self.done % every == 0:
            shown_image = self._last_image() if self.averager is None else self.averager.value()
            assert shown_image is not None  # the averager has just taken an image
            preview = self.inputs.finish(shown_image)
        event = dataclasses.replace(info, step=self.done, total=self.total, elapsed=self.clock(),
                                    size=self.inputs.size, scale=self.scale, scales=self.scales, preview=preview)
        self.last.update(style=event.style_loss, content=event.content_loss, tv=event.tv_loss, loss=event.loss)
        if not event.loss >= self.lowest.get("loss", float("inf")):
            self.lowest.update(self.last)
        self.first.setdefault("loss", event.loss)
        if self.on_event is not None:
            self.on_event(event)
        if self.last_scale and self.plateau.stalled(event.loss):
            self.run.cancel("plateau")
        if self.run.cancelled:
            raise _Stopped  # ends the loop here, between evaluations; the image is kept


def stylize(
    content: ImageSource,
    style: ImageSource | Sequence[ImageSource],
    config: StyleConfig | None = None,
    *,
    progress: ProgressCallback | None = None,
    download_progress: DownloadProgress | None = None,
    stats: RunStats | None = None,
    on_notice: Notice | None = None,
) -> Image.Image:
    """Repaint ``content`` in the style of ``style``; the one-call API (a ``run.Run`` without options).

    Args:
        content, style: file paths, Pillow images or ``(1, 3, H, W)`` tensors in [0, 1];
            ``style`` may be a list of them (several styles, blended by ``config.style_blend``).
        config: every setting; ``StyleConfig()`` (the tutorial's) when None.
        progress: called after every closure evaluation with a ``StepInfo``.
        download_progress: called while the pretrained weights download (first run only).
        stats: filled in with the evaluations run and whether LBFGS converged.
        on_notice: told, in one line, when the run takes the original VGG19 because torchvision's VGG19 cannot be
            downloaded (``Run``'s ``on_notice``); without it the switch is silent.

    Returns:
        The result as an RGB Pillow image, long side ``config.size`` (RGBA with the content's
        alpha when ``config.keep_alpha`` and the content has one).

    Raises:
        ImageError: an input image cannot be read. WeightsError: weights cannot be had.
        ValueError: a bad setting (unknown layer, unavailable device).
        ResourceError: the size cannot fit in memory (checked before the model loads) or ran out.
        Interrupted, NonFiniteLoss: the run stopped early; the exception carries the last good image.
    """
    return Run(content, style, config, download_progress=download_progress,
               on_notice=on_notice).execute(progress, stats=stats).image


def check_fits(content: ImageSource | tuple[int, int], style: ImageSource | Sequence[ImageSource],
               config: StyleConfig | None = None, *, available: int | None = None) -> list[int | None]:
    """Refuse, from the images' declared sizes alone, a run that cannot fit in its device's free memory.

    What ``Run.execute`` checks first, for front ends to check before they start work (a batch before its
    first item, the web app when a job is submitted). Only headers are read (``images.header_size``): no
    image is decoded or upscaled, so an impossible size is refused in a moment and in little memory.

    Args:
        content: an image source, or its (width, height) (a video's frames).
        available: bytes free for the run; None: ``memory.available_bytes`` of ``config.device`` (where it
            cannot be known, nothing is refused).

    Returns:
        The tile of each working size (None: untiled), as the run will choose them.

    Raises:
        ResourceError: naming the size, the estimate, the free memory and the largest size that fits,
            untiled and in tiles. ImageError: an input that cannot be read. ValueError: bad settings.
    """
    config = config or StyleConfig()
    # A list or tuple holds sources; anything else (a str path too, a Sequence to mypy) is one source.
    styles = cast(list[ImageSource], list(style) if isinstance(style, (list, tuple)) else [style])
    device = resolve_device(config.device)
    speed = speed_from_config(config, device)
    sizes = scale_sizes(config.size or default_size(device), filled(config.scales), config.min_size)
    return plan_tiles(sizes, _header_sizes(content, styles, config), config, speed, device, available,
                             styles=len(styles))


def _header_sizes(content: ImageSource | tuple[int, int], styles: Sequence[ImageSource],
                  config: StyleConfig) -> SizeFn:
    """The working sizes of a run's images at any long side, by arithmetic on their declared sizes."""
    content_wh = content if isinstance(content, tuple) else header_size(content)
    return sizes_from(*content_wh, [header_size(s) for s in styles], config.style_scale)


def _loading_text(config: StyleConfig) -> str:
    """What ``Run(on_stage=...)`` is told before the network loads: the model and where its weights come from."""
    model = config.model.upper()
    if config.weights == "random":
        return f"making {model} with seeded random weights"
    if config.weights in ("imagenet", "original"):
        return f"loading {model} weights ({config.weights})"
    return f"loading {model} weights from {shown(os.path.basename(config.weights))}"


class _Stopped(KeyboardInterrupt):
    """Raised from the progress callback to end the loop between evaluations (``Run.cancel``).

    A KeyboardInterrupt, so that the loop's own handling turns it into ``Interrupted`` carrying the
    image of the last evaluation (``core.run_stats.keeps_image_on_interrupt``)."""


class _Clock:
    """Seconds of optimisation: this process's, plus what a resumed run had spent before."""

    def __init__(self, before: float) -> None:
        self.before, self.start = before, time.perf_counter()

    def __call__(self) -> float:
        return self.before + time.perf_counter() - self.start


class _Inputs:
    """The images one working size needs, and how an optimised image becomes the picture a user gets.

    With ``config.margin`` the optimised image is the picture inside a mirrored border (``pad``): the content,
    the start image and the masks are padded, the picture is cut out of it (``crop``) at the end and in
    previews; ``picture`` is the content the transfer sees, unpadded.
    """

    def __init__(self, content: ImageSource, styles: Sequence[ImageSource], config: StyleConfig, size: int,
                 device: torch.device, final_size: int | None = None) -> None:
        self.config = config
        self.content = load_image(content, size, device)
        loaded = [load_style(s, style_size(size, config.style_scale), device) for s in styles]  # with their alpha
        styles_at, alphas = [image for image, _ in loaded], [alpha for _, alpha in loaded]
        self.picture, self.styles = prepare_colors(self.content, styles_at, config.preserve_colors, alphas)
        self.size = (self.content.shape[-1], self.content.shape[-2])
        self.margin = round(config.margin * size / (final_size or size))  # scaled at a coarser size
        if self.margin >= min(self.size):
            raise ImageError(f"margin {config.margin} px: the picture is {self.size[0]}x{self.size[1]} px at this "
                             "size; a mirrored border must be narrower than its short side")
        self.transfer_content = self.pad(self.picture)
        # the masks at this size (checked: count, files, emptiness, aspect), or None.
        guides = masks.load_guides(config.style_masks, config.content_mask, content,
                                   (self.content.shape[-2], self.content.shape[-1]), len(styles), device)
        self.guides = guides if guides is None or not self.margin else masks.Guides(
            None if guides.styles is None else [self.pad(m) for m in guides.styles],
            None if guides.content is None else self.pad(guides.content))
        self.guides = masks.with_style_alphas(self.guides, alphas)  # the styles' transparency, left out of targets

    def pad(self, image: torch.Tensor) -> torch.Tensor:
        """``image`` (the picture's size) inside its mirrored border."""
        if not self.margin:
            return image
        return F.pad(image, (self.margin,) * 4, mode="reflect")

    def crop(self, image: torch.Tensor) -> torch.Tensor:
        """The picture out of an optimised image."""
        if not self.margin:
            return image
        return image[..., self.margin:-self.margin, self.margin:-self.margin]

    def moved_to(self, image: torch.Tensor, other: _Inputs) -> torch.Tensor:
        """An optimised image of this size as ``other``'s start: its picture resized, in ``other``'s border."""
        return other.pad(fit_to(self.crop(image), other.picture))

    def start_image(self) -> torch.Tensor:
        image = initial_image(self.transfer_content, self.config.init, self.config.seed, style_img=self.styles[0])
        if self.config.preserve_colors == "luminance" and self.config.init not in ("content", "noise", "style"):
            image = colors.gray(colors.luminance(image))  # a start file's luminance
        return image

    def finish_tensor(self, image: torch.Tensor) -> torch.Tensor:
        """The picture out of an optimised image, the content's chroma back under ``preserve_colors="luminance"``."""
        image = self.crop(image)
        if self.config.preserve_colors == "luminance":
            return colors.keep_content_chroma(image.clamp(0, 1), self.content)
        return image

    def finish(self, image: torch.Tensor, alpha: Image.Image | None = None) -> Image.Image:
        return colors.attach_alpha(tensor_to_pil(self.finish_tensor(image)), alpha)


class _Plateau:
    """``min_improvement`` R and ``patience`` K: stalled once the lowest loss seen improved by less than
    the fraction R over the last K evaluations (the lowest, not the last: LBFGS's loss spikes)."""

    def __init__(self, min_improvement: float | None, patience: int | None) -> None:
        self.rate, self.patience = min_improvement, patience
        self.best: list[float] = []

    def stalled(self, loss: float) -> bool:
        if self.rate is None or not self.patience:
            return False
        self.best.append(min(loss, self.best[-1]) if self.best else loss)
        if len(self.best) <= self.patience:
            return False
        then, now = self.best[-1 - self.patience], self.best[-1]
        return then - now < self.rate * abs(then)


def style_targets_key(config: StyleConfig, content: ImageSource, styles: Sequence[ImageSource],
                      style_images: Sequence[torch.Tensor], device: torch.device) -> tuple:
    """What a style's Gram targets depend on: the style files' hashes, the working size they were read at
    (with the style scale), the layers, the network (model, weights, preprocessing, pooling), the blend, the device and
    the style statistics (``style_loss``: each keeps its own kind of target); and the
    content's hash when the colours are matched to it (``preserve_colors``)."""
    return (tuple(provenance.input_entry(s)["sha256"] for s in styles),
            tuple(tuple(image.shape[-2:]) for image in style_images), config.style_scale,
            tuple(filled(config.style_layers)), config.pooling, config.model, config.weights, config.preprocess,
            config.style_blend, str(device), config.style_loss,
            config.preserve_colors,
            provenance.input_entry(content)["sha256"] if config.preserve_colors != "none" else None)
