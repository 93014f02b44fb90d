"""The loop's ``TransferSettings`` for a ``StyleConfig``, resolved in one place: a ``Run`` and a library user get the
same algorithm from the same config (``config.algorithm`` says what the optimiser moves and remembers)."""

from __future__ import annotations

from ..config.algorithm import history_of, two_loop_of
from ..config.style import StyleConfig
from ..core.transfer import TransferSettings
from ..fast.basis import basis_of


def transfer_settings(config: StyleConfig, **objects: object) -> TransferSettings:
    """The maths of ``config`` (layers, loss forms, optimiser, backward, style statistics, and what ``--fast`` makes
    the optimiser move and remember: the basis, ``fast.basis.basis_of``, LBFGS's history and its kind), then
    ``objects`` (any field of ``TransferSettings``: normalization, progress, a tiled size's shorter history, ...).

    What depends on the device (``accelerate``: bf16 where it pays off) and on the image's size (``tiles``) is not
    in the config alone: a ``Run`` adds them (``fast.fast.accelerator``, ``tiling.tiling.tiles_for``).
    """
    maths = dict(content_layers=config.content_layers, style_layers=config.style_layers,
                 style_layer_weights=config.style_layer_weights, style_blend=config.style_blend,
                 loss_form=config.loss_form, pooling=config.pooling, tv_weight=config.tv_weight,
                 style_loss=config.style_loss, seed=config.seed, optimizer_name=config.optimizer, lr=config.lr,
                 history_size=history_of(config), two_loop=two_loop_of(config), backward=config.backward,
                 basis=basis_of(config))
    return TransferSettings(**{**maths, **objects})  # type: ignore[arg-type]
