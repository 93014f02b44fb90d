"""The loop's ``TransferSettings`` for a ``StyleConfig``, resolved in one place: a ``Run`` and a library user get the
same algorithm from the same config (``fast.speed.resolve_speed`` says what the optimiser moves and remembers)."""

from __future__ import annotations

from ..config.checks import filled
from ..config.style import StyleConfig
from ..core.transfer import Maths, Parts, TransferSettings
from ..fast.basis import basis_of
from ..fast.speed import Speed, resolve_speed


def transfer_settings(config: StyleConfig, speed: Speed | None = None, **objects: object) -> TransferSettings:
    """The maths of ``config`` (``Maths``: layers, loss forms, optimiser, backward, style statistics, and what
    ``--fast`` makes the optimiser remember at ``speed``: LBFGS's history and its kind), the basis it moves
    (``fast.basis.basis_of``), then ``objects``: any field of ``Maths``, ``Parts`` or ``Watchers`` by name
    (normalization, progress, ...), each to its group (``TransferSettings.changed``). ``speed``: the run's
    (``fast.fast.speed_from_config``; a tiled size's: ``tiling.plans.tiled_speed``); None: ``config``'s on no device
    in particular (what the optimiser does does not depend on one).

    What depends on the device (``accelerate``: bf16 where it pays off) and on the image's size (``tiles``) is not
    in the config alone: a ``Run`` adds them (``fast.fast.accelerator``, ``tiling.tiling.tiles_for``).
    """
    speed = speed if speed is not None else resolve_speed(config)
    maths = Maths(content_layers=filled(config.content_layers), style_layers=filled(config.style_layers),
                  style_layer_weights=config.style_layer_weights, style_blend=config.style_blend,
                  loss_form=filled(config.loss_form), pooling=filled(config.pooling), tv_weight=config.tv_weight,
                  style_loss=config.style_loss, seed=config.seed, optimizer_name=config.optimizer, lr=config.lr,
                  history_size=speed.history_size, two_loop=speed.two_loop, backward=config.backward)
    return TransferSettings(maths, Parts(basis=basis_of(speed, config.unguarded))).changed(**objects)
