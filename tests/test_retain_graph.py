"""The retain_graph demonstration: it runs, and the numbers it prints are right."""

from __future__ import annotations

import re

import pytest

from style_transfer import retain_graph

SECOND_TIME = "Trying to backward through the graph a second time"


def vector_after(text: str, label: str) -> list[float]:
    line = next(line for line in text.splitlines() if label in line)
    inside = re.search(r"\[([^\]]*)\]", line.split(label, 1)[1]).group(1)
    return [float(v) for v in inside.split(",")]


def test_demo_prints_the_real_error_and_right_gradients(monkeypatch: pytest.MonkeyPatch, cnn, capsys) -> None:
    monkeypatch.setattr(retain_graph, "random_vgg19_features", lambda seed: cnn)  # no rebuild; same seed 0
    retain_graph.main()
    out = capsys.readouterr().out
    assert out.count(f"RuntimeError: {SECOND_TIME}") == 3  # toy graph, style model, after the last pass

    a = vector_after(out, "1. A small graph: a =")
    n = len(a)
    # Worked out by hand: d = Σ 2a²/n, e = Σ 2a², so dd/da = 4a/n and de/da = 4a.
    grad_d = [4 * v / n for v in a]
    grad_d_and_e = [4 * v / n + 4 * v for v in a]
    assert a == [1, 2, 3]
    assert vector_after(out, "after d.backward(retain_graph=True):") == pytest.approx(grad_d, rel=1e-5)
    assert vector_after(out, "after e.backward() as well:") == pytest.approx(grad_d_and_e, rel=1e-5)
    assert vector_after(out, "of (d + e).backward() alone:") == pytest.approx(grad_d_and_e, rel=1e-5)

    assert "style_loss_1.backward() ran, style_loss_2.backward() raised" in out
    assert "6 backward passes reached the image" in out and "1 backward pass" in out
    diff, largest = map(float, re.search(r"combined gradient\| = (\S+), max \|gradient\| = (\S+):", out).groups())
    assert 0 < largest and diff <= 1e-5 * largest
    assert "equal within 1e-05" in out


def test_demo_functions() -> None:
    toy = retain_graph.toy_demo((0.5, -1.0))
    assert SECOND_TIME in toy.error
    assert toy.grad_after_d == pytest.approx((4 * 0.5 / 2, 4 * -1.0 / 2))
    assert toy.grad_after_d_and_e == pytest.approx((1 + 2, -2 - 4))  # 4a/n + 4a
    assert toy.grad_of_sum == pytest.approx((1 + 2, -2 - 4))
