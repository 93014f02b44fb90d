"""The loop's ``TransferSettings`` for a ``StyleConfig``, resolved in one place: a ``Run`` and a library user get the
same algorithm from the same config (``fast.speed.resolve_speed`` says what the optimiser moves and remembers)."""

from __future__ import annotations

from ..config.style import StyleConfig
from ..core.transfer import TransferSettings
from ..fast.basis import basis_of
from ..fast.speed import Speed, resolve_speed


def transfer_settings(config: StyleConfig, speed: Speed | None = None, **objects: object) -> TransferSettings:
    """The maths of ``config`` (layers, loss forms, optimiser, backward, style statistics, and what ``--fast`` makes
    the optimiser move and remember at ``speed``: the basis, ``fast.basis.basis_of``, LBFGS's history and its kind),
    then ``objects`` (any field of ``TransferSettings``: normalization, progress, ...). ``speed``: the run's
    (``fast.fast.speed_from_config``; a tiled size's: ``tiling.plans.tiled_speed``); None: ``config``'s on no device
    in particular (what the optimiser does does not depend on one).

    What depends on the device (``accelerate``: bf16 where it pays off) and on the image's size (``tiles``) is not
    in the config alone: a ``Run`` adds them (``fast.fast.accelerator``, ``tiling.tiling.tiles_for``).
    """
    speed = speed if speed is not None else resolve_speed(config)
    maths = dict(content_layers=config.content_layers, style_layers=config.style_layers,
                 style_layer_weights=config.style_layer_weights, style_blend=config.style_blend,
                 loss_form=config.loss_form, pooling=config.pooling, tv_weight=config.tv_weight,
                 style_loss=config.style_loss, seed=config.seed, optimizer_name=config.optimizer, lr=config.lr,
                 history_size=speed.history_size, two_loop=speed.two_loop, backward=config.backward,
                 basis=basis_of(speed, config.unguarded))
    return TransferSettings(**{**maths, **objects})  # type: ignore[arg-type]
