"""Tiled evaluation of the W2 loss (``--style-loss wasserstein --tile``): means and covariances added up over
crops in pass 1, each crop's backward of the linearised loss in pass 2; checked against the untiled loss and
gradient in float64, and the targets computed over crops against the whole images'."""

from __future__ import annotations

import pytest

from style_transfer import StyleConfig
from style_transfer.losses.statistics import WassersteinStyleLoss
from style_transfer.tiling import tiling

from .test_tiling import build, cnn64, rand, relative, run_images, tiled, untiled  # noqa: F401  (cnn64: a fixture)


@pytest.mark.parametrize("pooling", ["max", "avg"])
def test_tiled_w2_equals_untiled_in_float64(cnn64, pooling: str) -> None:  # noqa: F811  (the fixture)
    """The tutorial's layers at 64x48 in 3x2 crops (and one): loss, each module's loss and the image gradient;
    two styles blended 1:3; a mean shifted far from zero (the image + 2) so the covariance's cancellation shows."""
    content, image = rand(1, 3, 48, 64, seed=2), rand(1, 3, 48, 64, seed=3) + 2
    styles = [rand(1, 3, 40, 56, seed=4), rand(1, 3, 52, 36, seed=5)]
    model, sl, cl, extras = build(cnn64, content, styles, tv=0.3, style_blend=(1, 3), pooling=pooling,
                                  style_loss="wasserstein")
    assert all(type(m) is WassersteinStyleLoss for m in sl)
    reference = untiled(model, sl, cl, extras, image, 100, 1)
    for tile in (46, 64):
        tiler = tiling.TiledStyleModel(model, tile)
        assert len(tiler.crops(48, 64)) == (6 if tile == 46 else 1)
        result = tiled(tiler, sl, cl, extras, image, 100, 1)
        assert abs(result[0] - reference[0]) <= 1e-9 * reference[0]
        assert result[2] == pytest.approx(reference[2], rel=1e-9)
        assert relative(result[1], reference[1]) < 1e-9
    twin, twin_sl, _, _ = build(cnn64, tiling.stand_ins(content), tiling.stand_ins(styles), style_blend=(1, 3),
                                pooling=pooling, style_loss="wasserstein")
    tiling.TiledStyleModel(twin, 46).set_targets(content, styles, (1, 3))
    for ours, theirs in zip(twin_sl, sl):  # the mean and the covariance (the root's square: the root itself
        assert relative(ours.target[0], theirs.target[0]) < 1e-9  # amplifies rounding at tiny eigenvalues)
        assert relative(ours.target[1:] @ ours.target[1:], theirs.target[1:] @ theirs.target[1:]) < 1e-9


def test_the_settings_take_wasserstein_tiles_and_still_refuse_sliced() -> None:
    assert StyleConfig(style_loss="wasserstein", tile=64).tile == 64
    with pytest.raises(ValueError, match="tile cannot be combined with style_loss 'sliced'"):
        StyleConfig(style_loss="sliced", tile=64)


def test_a_tiled_w2_run_gives_the_untiled_first_evaluations() -> None:
    """Refused before (\"its gradient over crops is not built\"): a run at 64 px in tiles of 46 px (float32)."""
    base = {"size": 64, "steps": 1, "weights": "random", "device": "cpu", "optimizer": "adam",
            "style_loss": "wasserstein"}
    plain_events, _ = run_images(StyleConfig(**base))
    tiled_events, result = run_images(StyleConfig(**base, tile=46))
    assert len(tiled_events) == len(plain_events) == 2
    for plain, ours in zip(plain_events, tiled_events):
        for name in ("style_loss", "content_loss"):
            assert getattr(ours, name) == pytest.approx(getattr(plain, name), rel=1e-4, abs=1e-12)
    assert result.record["settings"]["tile"] == 46
