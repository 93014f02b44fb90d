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
import threading
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
from PIL import Image

from ..config.checks import filled
from ..config.run_options import RunOptions
from ..config.style import StyleConfig
from ..core import colors
from ..core.run_stats import RunStats
from ..core.transfer import ProgressCallback, Resume, run_style_transfer
from ..errors import Interrupted, NonFiniteLoss
from ..fast.fast import accelerator, speed_from_config
from ..fast.speed import Speed
from ..io import provenance
from ..io.images import ImageSource
from ..losses.terms import normalized_blend
from ..memory import out_of_memory
from ..networks.download import DownloadProgress, Notice, resolve_weights
from ..networks.vgg import IMAGENET_MEAN, IMAGENET_STD, Network, load_network
from ..tiling import tiling
from ..tiling.plans import plan_tiles, tiled_speed
from . import STOP_REASONS, RunResult, Unfinished
from .checkpoints import Checkpoints, Saved, fingerprint
from .inputs import Content, Inputs, style_targets_key
from .plans import plan_run
from .prepare import device_and_size, fit_to, header_sizes
from .progress import Clock, EventCallback, Progress, building_text, loading_text
from .rates import keep_rate
from .timing import Estimate
from .settings import transfer_settings


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
            (``run_style_transfer``). cnn: the network already loaded with ``config.model`` and ``config.weights``
            (a ``networks.vgg.Network``; a bare ``features`` block is taken to expect ``config.preprocess`` or
            torchvision's), reused across runs (video/ and batch/ load it once; never changed).
        style_targets: a cache of Gram targets shared by runs (batch), keyed by ``inputs.style_targets_key``;
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
        self.on_notice, self.on_stage = on_notice, on_stage
        self._stop, self._reason = threading.Event(), "cancelled"
        self._where: tuple[torch.device, int] | None = None  # the device and the long side, once resolved
        self._preprocess: str | None = None  # the preprocessing the loaded network expects, once known
        self._stats: RunStats | None = None  # the running one, once execute began (the record names its rescues)
        self._watch: Progress | None = None  # the running one's progress, once execute began (its clock)
        self._content: Content | None = None  # the content as read, once planned
        self.unfinished: Unfinished | None = None  # where a run of several sizes stopped before its last

    def estimate(self) -> Estimate | None:
        """The whole run's time on this machine at its rate so far, once its first size has run a few evaluations."""
        return None if self._watch is None else self._watch.timing.estimate()

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the run after the evaluation under way (``execute`` returns its image then, ``reason`` becomes
        ``RunResult.stopped``). Thread-safe, and safe from a signal handler."""
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
            if self._where is None:
                raise  # before the run had a device: not its memory
            error = out_of_memory(exc, self._where[1], self._where[0], self.config.tile)
            if error is None:
                raise
            raise error from None

    def record(self, evaluations: int, stopped: str, losses: dict[str, float], seconds: float,
               kept: int | None = None) -> dict[str, Any]:
        """The provenance record of an image of this run (``provenance.make_record``); ``kept``: the evaluation
        whose image it handed back, where not its last; with the rescues' evaluations (``RunStats.rescued_at``)."""
        device = self._resolve()[0]
        config = self.config  # the record names the preprocessing the weights told (replay passes it back)
        if config.preprocess is None and self._preprocess is not None:
            config = dataclasses.replace(config, preprocess=self._preprocess)
        content = self._content.entry if self._content is not None else self.content  # the file hashed once
        return provenance.make_record(config, content=content, styles=self.styles,
                                      weights=config.weights, device=str(device), evaluations=evaluations,
                                      losses=losses, seconds=seconds, stopped=stopped, kept=kept,
                                      rescued_at=self._stats.rescued_at if self._stats is not None else (),
                                      unfinished=dataclasses.asdict(self.unfinished) if self.unfinished else None)

    def _resolve(self) -> tuple[torch.device, int]:
        """The device the run takes and its long side (``prepare.device_and_size``), resolved once."""
        if self._where is None:
            self._where = device_and_size(self.config)
        return self._where

    def _execute(self, on_event: EventCallback | None, stats: RunStats) -> RunResult:
        self._stats = stats
        plan = self._plan()
        config, device, keeper, saved, final = plan.config, plan.device, plan.keeper, plan.saved, plan.final
        clock = Clock(saved.seconds if saved else 0.0)
        stats.evaluations = saved.evaluations if saved else 0
        watch = self._watch = Progress(self, config, sizes=plan.sizes, evaluations=plan.evaluations, saved=saved,
                                       keeper=keeper, final=final, preview_every=self.options.preview_every,
                                       stats=stats, clock=clock, on_event=on_event)
        image: torch.Tensor | None = None
        inputs = final
        for scale, working_size in enumerate(plan.sizes):
            if saved is not None and scale < saved.scale:
                continue  # sizes the checkpointed run had finished
            previous = inputs
            inputs = final if scale == len(plan.sizes) - 1 else Inputs(plan.content.image(), self.styles, config,
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
        keep_rate(self.options.rates, watch.timing, config, plan.speed, device, plan.tiles)  # this machine's book
        assert image is not None  # the last size always runs (a checkpoint's scale is one of the plan's sizes)
        stopped = "converged" if stats.converged else "done"
        kept = stats.handed_back
        return self._result(inputs.finish(image, plan.alpha), stats.evaluations, stopped,
                            watch.last if kept is None else watch.lowest, clock(), kept, watch.first.get("loss"))

    def _plan(self) -> _Plan:
        """The set-up, before any evaluation: the device, the long side and the weights resolved once (torchvision's
        VGG19 offline: the original VGG19 where installed, the config the record and checkpoint name), then what is
        wrong with the settings, sizes, images or checkpoint fails, cheapest first; the network is loaded last."""
        options = self.options
        device, size = self._resolve()
        if self.cnn is None:
            self.config = resolve_weights(self.config, download_progress=self.download_progress,
                                          on_notice=self.on_notice)
        config = self.config
        speed = speed_from_config(config, device)  # checks bf16 support before any work
        plan = plan_run(config, size, speed)  # the sizes, and what each runs in whole LBFGS steps (plans.py)
        normalized_blend(config.style_blend, len(self.styles))  # a blend that does not fit fails before any work
        # Each size's tile (None: untiled): config.tile, or chosen where a size does not fit untiled.
        # From the headers' sizes, before any image is read at a working size: a size that cannot fit is
        # refused in a moment, not after its images were upscaled (docs/inputs-and-errors.md).
        tiles = plan_tiles(list(plan.sizes), header_sizes(self.content, self.styles, config), config, speed,
                           device, styles=len(self.styles))
        # Images are read before the model loads, so a bad image fails fast; the content file once.
        content = self._content = Content(self.content)
        picture = content.image()
        final = Inputs(picture, self.styles, config, size, device)
        alpha = colors.content_alpha(picture, size) if config.keep_alpha else None
        keeper = Checkpoints(options, fingerprint(config, content.entry, self.styles))
        saved = keeper.load() if options.resume else None  # a checkpoint that does not fit fails before the model
        if self.cnn is None and self.on_stage is not None:
            self.on_stage(loading_text(config))
        network = self.cnn if self.cnn is not None else load_network(
            config.model, config.weights, preprocess=config.preprocess, download_progress=self.download_progress)
        if not isinstance(network, Network):  # a bare features block (the tutorial's kind of cnn)
            # The tutorial's cnn: an nn.Sequential of convs, ReLUs and pools.
            network = Network(cast(torch.nn.Sequential, network), config.model, config.preprocess or "torchvision")
        self._preprocess = network.preprocess
        return _Plan(config, device, size, speed, tuple(plan.sizes), tuple(plan.loop_steps), tuple(plan.evaluations),
                     tuple(tiles), content, final, alpha, keeper, saved, network.features.to(device),
                     network.normalization())

    def _run_size(self, plan: _Plan, scale: int, inputs: Inputs, image: torch.Tensor, resume: Resume | None,
                  watch: Progress, stats: RunStats, clock: Clock) -> torch.Tensor:
        """The tutorial's loop at one working size, from ``image``; the size's result."""
        config, keeper = plan.config, plan.keeper
        targets = None
        if self.style_targets is not None:
            key = style_targets_key(config, plan.content.entry, self.styles, inputs.styles, plan.device)
            targets = self.style_targets.get(key)
            if targets is None:
                targets = self.style_targets[key] = {}  # filled in by the model's first build
        if self.on_stage is not None and watch.first_size:  # the first size this run runs
            watch.first_size = False
            self.on_stage(building_text(inputs.size, scale, len(plan.sizes)))
        tiled = tiling.tiles_for(image, plan.tiles[scale])
        at_size = tiled_speed(plan.speed) if tiled else plan.speed  # tiled: none of the model's levers
        settings = transfer_settings(
            config, at_size, normalization=plan.normalization, guides=inputs.guides,
            image_losses=self.image_losses, style_targets=targets, progress=watch, stats=stats, resume=resume,
            on_step_end=lambda optimizer, img, n: keeper.step_end(scale, img, optimizer, n, watch.done, clock),
            accelerate=accelerator(at_size), tiles=tiled, keep_best=self.keep_best)
        image = run_style_transfer(
            plan.cnn, IMAGENET_MEAN, IMAGENET_STD, inputs.transfer_content,
            inputs.styles[0] if len(inputs.styles) == 1 else inputs.styles, image, plan.budgets[scale],
            filled(config.style_weight), filled(config.content_weight), settings)
        if watch.averager is not None and watch.averager.count:  # the size's result is its average
            average = watch.averager.value()
            assert average is not None  # count > 0: it has taken an image
            image = average
        return image

    def _stopped(self, exc: Interrupted | NonFiniteLoss, plan: _Plan, inputs: Inputs, image: torch.Tensor,
                 watch: Progress, stats: RunStats, clock: Clock) -> RunResult:
        """A run stopped inside the loop: its result where it was cancelled; ``exc`` again, with the picture, else."""
        plan.keeper.save()  # the state after the last whole LBFGS step, to resume from
        keep_rate(self.options.rates, watch.timing, plan.config, plan.speed, plan.device, plan.tiles)
        if watch.averager is not None and watch.averager.count:
            exc.image = watch.averager.value()
        # A run stopped at a coarse size still gives a picture of the size asked for, and says which size it is.
        if watch.scale < len(plan.sizes) - 1:
            self.unfinished = Unfinished(inputs.size, watch.scale + 1, len(plan.sizes))
        kept = None if exc.image is None else inputs.moved_to(exc.image.to(plan.device), plan.final)
        if isinstance(exc, NonFiniteLoss) or not self._stop.is_set():
            exc.image = None if kept is None else plan.final.finish_tensor(kept).cpu()
            raise exc
        result = plan.final.finish(kept if kept is not None else inputs.moved_to(image, plan.final), plan.alpha)
        return self._result(result, stats.evaluations, self._reason, watch.last, clock())

    def _result(self, image: Image.Image, evaluations: int, stopped: str, losses: dict[str, float],
                seconds: float, kept: int | None = None, start_loss: float | None = None) -> RunResult:
        return RunResult(image, evaluations, stopped, dict(losses), seconds,
                         self.record(evaluations, stopped, losses, seconds, kept), kept, start_loss, self.unfinished)


@dataclass(frozen=True, eq=False)
class _Plan:
    """A run's set-up (``Run._plan``): settings resolved, sizes and tiles planned, inputs read, network loaded."""

    config: StyleConfig  # with the weights the run takes (resolve_weights)
    device: torch.device
    size: int  # the long side asked for
    speed: Speed
    sizes: tuple[int, ...]  # the working sizes, smallest first
    budgets: tuple[int, ...]  # each size's evaluations (plans.plan_run)
    evaluations: tuple[int, ...]  # each size's planned evaluations (their sum: StepInfo.total)
    tiles: tuple[int | None, ...]  # each size's tile (None: untiled)
    content: Content  # the content as read (once)
    final: Inputs  # the images at the last size
    alpha: Image.Image | None  # the content's alpha, put back on the result (keep_alpha)
    keeper: Checkpoints
    saved: Saved | None  # the checkpoint resumed from
    cnn: torch.nn.Sequential  # the network's features block
    normalization: torch.nn.Module


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
