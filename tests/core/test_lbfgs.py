"""The stacked LBFGS (core/lbfgs.py, --fast's) takes torch's LBFGS's steps: checked against torch's own LBFGS in float64
(where rounding cannot hide a wrong formula), across a full history, a torch state it takes over, a checkpoint's round
trip and pairs rescaled in place, but for the step after a first pair it does not store, checked by hand; and the
optimiser a run gets."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from style_transfer.core.lbfgs import LBFGS, StackedLBFGS, pairs_changed
from style_transfer.core.transfer import get_input_optimizer

SIZE = 300  # unknowns
# Relative difference of iterates in float64: the two recursions are the same sums in another order, so they agree
# to about 1e-15 x the problem's conditioning (measured 1e-15 to 4e-15 here); a wrong product or sign is above 1e-3.
FLOAT64_TOLERANCE = 1e-10


def problem(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """A convex quadratic with a quartic term (LBFGS stores a pair at every iteration), seeded."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(SIZE, SIZE, generator=generator, dtype=torch.float64)
    return (a @ a.T / SIZE + 0.1 * torch.eye(SIZE, dtype=torch.float64)).to(dtype), torch.randn(
        SIZE, generator=generator, dtype=torch.float64).to(dtype)


def closure_of(optimizer: torch.optim.Optimizer, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = 0.5 * x @ a @ x - b @ x + 0.01 * (x**4).sum()
        loss.backward()
        return loss
    return closure


def iterates(cls: type, steps: int, history: int, *, dtype: torch.dtype = torch.float64, max_iter: int = 7,
             state: dict | None = None, x0: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    """The variable after each of ``steps`` optimiser steps (from ``x0`` and a loaded ``state`` if given)."""
    a, b = problem(dtype)
    x = (torch.zeros(SIZE, dtype=dtype) if x0 is None else x0.clone()).requires_grad_(True)
    optimizer = cls([x], history_size=history, max_iter=max_iter)
    if state is not None:
        optimizer.load_state_dict(state)
    closure, seen = closure_of(optimizer, x, a, b), []
    for _ in range(steps):
        optimizer.step(closure)
        seen.append(x.detach().clone())
    return seen, optimizer


def relative(x: torch.Tensor, reference: torch.Tensor) -> float:
    return float((x.double() - reference.double()).abs().max() / reference.double().abs().max())


@pytest.mark.parametrize("history", [3, 100])  # 3: the ring of rows wraps many times; 100: never full here
def test_its_steps_are_torchs_steps(history: int) -> None:
    theirs, torch_lbfgs = iterates(LBFGS, 3, history)  # 21 iterations: 20 pairs, far from converged
    ours, stacked = iterates(StackedLBFGS, 3, history)
    for mine, reference in zip(ours, theirs):
        assert relative(mine, reference) < FLOAT64_TOLERANCE
    control = relative(theirs[1], theirs[0])  # the iterates move: the comparison could fail
    assert control > 1e-3
    state, reference = stacked.state[stacked._params[0]], torch_lbfgs.state[torch_lbfgs._params[0]]
    assert (state["n_iter"], state["func_evals"], len(state["old_dirs"])) == (
        reference["n_iter"], reference["func_evals"], len(reference["old_dirs"]))
    assert len(state["old_dirs"]) == min(history, reference["n_iter"] - 1)  # a pair at each iteration after the first
    for mine, theirs_y in zip(state["old_dirs"], reference["old_dirs"]):  # the same pairs, oldest first
        assert relative(mine, theirs_y) < FLOAT64_TOLERANCE


def test_in_float32_it_is_as_close_to_float64_as_torchs() -> None:
    """In float32 each recursion rounds on its own: the stacked one's iterates stay as near the float64 ones as torch's
    do (within 10x the larger of torch's own distance and float32's epsilon)."""
    exact, _ = iterates(LBFGS, 2, 100)
    theirs, _ = iterates(LBFGS, 2, 100, dtype=torch.float32)
    ours, _ = iterates(StackedLBFGS, 2, 100, dtype=torch.float32)
    bound = 10 * max(relative(theirs[-1], exact[-1]), torch.finfo(torch.float32).eps)
    assert relative(ours[-1], exact[-1]) < bound


def test_it_takes_over_a_torch_lbfgs_state() -> None:
    """A checkpoint written by torch's LBFGS (older --fast runs) resumes in the stacked one: the same next steps."""
    before, torch_lbfgs = iterates(LBFGS, 2, 4)
    # copies: a loaded state shares its tensors with the dict it came from, and LBFGS updates some in place
    theirs, _ = iterates(LBFGS, 2, 4, state=copy.deepcopy(torch_lbfgs.state_dict()), x0=before[-1])
    ours, stacked = iterates(StackedLBFGS, 2, 4, state=copy.deepcopy(torch_lbfgs.state_dict()), x0=before[-1])
    for mine, reference in zip(ours, theirs):
        assert relative(mine, reference) < FLOAT64_TOLERANCE
    memory = stacked.state[stacked._params[0]]
    assert all(y.data_ptr() == memory["y_rows"][k].data_ptr() for y, k in zip(memory["old_dirs"], memory["slots"]))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_checkpoint_round_trip_resumes_the_same_steps(dtype: torch.dtype) -> None:
    """torch.save/torch.load of its state_dict (what run/checkpoints.py keeps), loaded into a fresh optimiser: the same
    steps as the run that went on; load_state_dict casts the float64 products to the variable's dtype, so in float32
    they are worked out again, in another order. In float64 that order is invisible (FLOAT64_TOLERANCE); in float32
    the resumed steps land no further from the run that went on than that run lands from itself resumed at points one
    rounding step away (the controls, measured here: what 14 iterations make of float32's rounding on this CPU)."""
    first, stacked = iterates(StackedLBFGS, 3, 4, dtype=dtype)
    buffer = io.BytesIO()
    torch.save(stacked.state_dict(), buffer)
    straight, _ = iterates(StackedLBFGS, 5, 4, dtype=dtype)

    def resumed_from(x0: torch.Tensor) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
        buffer.seek(0)
        return iterates(StackedLBFGS, 2, 4, dtype=dtype, state=torch.load(buffer), x0=x0)

    resumed, again = resumed_from(first[-1])
    if dtype == torch.float64:
        tolerance = FLOAT64_TOLERANCE
    else:
        up, down = (torch.nextafter(first[-1], torch.full_like(first[-1], v)) for v in (torch.inf, -torch.inf))
        alternate = torch.where(torch.arange(SIZE) % 2 == 0, up, down)
        controls = [relative(resumed_from(x0)[0][-1], straight[-1]) for x0 in (up, down, alternate)]
        assert min(controls) > 0  # the moved starts did move
        tolerance = 4 * max(controls)
    for mine, reference in zip(resumed, straight[3:]):
        assert relative(mine, reference) <= tolerance
    memory = again.state[again._params[0]]
    assert memory["sy"].dtype == torch.float64 and memory["yy"].dtype == torch.float64


def test_pairs_rescaled_in_place_give_torchs_next_steps() -> None:
    """fast.basis rescales the pairs in place (``rebase``) and calls ``pairs_changed``: the next steps are those of a
    torch LBFGS holding the same rescaled pairs; without the call the cached products would be stale (the control)."""
    scale = torch.linspace(0.5, 2.0, SIZE, dtype=torch.float64)

    def rescaled(cls: type, tell: bool) -> list[torch.Tensor]:
        first, optimizer = iterates(cls, 2, 4)
        memory = optimizer.state[optimizer._params[0]]
        for y, s in zip(memory["old_dirs"], memory["old_stps"]):
            y.div_(scale)
            s.mul_(scale)
        memory["d"].mul_(scale)
        memory["prev_flat_grad"].div_(scale)
        memory["H_diag"] = memory["old_dirs"][-1].dot(memory["old_stps"][-1]) / memory["old_dirs"][-1].dot(
            memory["old_dirs"][-1])
        if tell:
            pairs_changed(memory)
        a, b = problem()
        x = optimizer._params[0]
        closure = closure_of(optimizer, x, a, b)
        seen = []
        for _ in range(2):
            optimizer.step(closure)
            seen.append(x.detach().clone())
        return seen

    theirs, ours, stale = rescaled(LBFGS, False), rescaled(StackedLBFGS, True), rescaled(StackedLBFGS, False)
    for mine, reference in zip(ours, theirs):
        assert relative(mine, reference) < FLOAT64_TOLERANCE
    assert relative(stale[0], theirs[0]) > 1e-6  # the products do change with the scale: the call is needed


@pytest.mark.parametrize("cls", [LBFGS, StackedLBFGS])
def test_a_first_pair_not_stored_scales_the_next_step_by_its_s_over_y(cls: type) -> None:
    """Along a concave quadratic (curvature -k) the first pair's y·s is negative and neither stores it. torch's next
    step is the gradient at the whole learning rate; the stacked LBFGS scales it by |s|/|y| = 1/k. Both worked out
    by hand from LBFGS's first step, lr min(1, 1/|g|_1)."""
    k, lr = 100.0, 1.0
    b = torch.linspace(-1.0, 1.0, SIZE, dtype=torch.float64)
    x0 = torch.full((SIZE,), 0.5, dtype=torch.float64)
    x = x0.clone().requires_grad_(True)
    optimizer = cls([x], lr=lr, max_iter=2, max_eval=4)  # two iterations: the first step, then the one after the pair

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = -0.5 * k * (x @ x) + b @ x
        loss.backward()
        return loss

    optimizer.step(closure)
    g0 = -k * x0 + b
    x1 = x0 - min(1.0, 1.0 / float(g0.abs().sum())) * lr * g0
    g1 = -k * x1 + b
    scale = 1 / k if cls is StackedLBFGS else 1.0  # |s|/|y|: y = -k s here
    expected = x1 - lr * scale * g1
    assert relative(x.detach(), expected) < FLOAT64_TOLERANCE
    assert relative(x1 - lr * g1, x1 - lr * g1 / k) > 1e-2  # the two rules part: the test tells them apart
    assert not optimizer.state[optimizer._params[0]]["old_dirs"]  # no pair stored by either


def test_get_input_optimizer_gives_torchs_unless_asked() -> None:
    image = torch.zeros(1, 3, 4, 4, requires_grad=True)
    assert type(get_input_optimizer(image)) is LBFGS  # the tutorial's
    stacked = get_input_optimizer(image, two_loop="stacked", history_size=7)
    assert isinstance(stacked, StackedLBFGS) and stacked.param_groups[0]["history_size"] == 7
    with pytest.raises(ValueError, match="two_loop must be one of torch, stacked"):
        get_input_optimizer(image, two_loop="compact")
    with pytest.raises(ValueError, match="no line search"):
        StackedLBFGS([image], line_search_fn="strong_wolfe")


@pytest.mark.parametrize("cls", [LBFGS, StackedLBFGS])
def test_a_planned_step_runs_its_iterations_and_keeps_no_pair_across_a_switch(cls: type) -> None:
    """``planned_step(closure, n, switched=True)`` (the loop's float32 finish, core/steps.py): a step of ``n``
    iterations whose first gradient makes no pair with the last step's (a step of length 0 before it stores none,
    torch's test ``y·s > 1e-10``), ``max_iter`` the optimiser's own after it; the same steps as that step of length
    0 and a shorter ``max_iter`` set from outside, the way the loop once did it."""
    a, b = problem()
    runs = []
    for planned in (True, False):
        x = torch.zeros(SIZE, dtype=torch.float64, requires_grad=True)
        optimizer = cls([x], max_iter=7)
        closure = closure_of(optimizer, x, a, b)
        optimizer.step(closure)
        pairs = len(optimizer.state[x]["old_dirs"])
        if planned:
            optimizer.planned_step(closure, 3, switched=True)
        else:
            optimizer.state[x]["t"] = 0.0
            optimizer.param_groups[0]["max_iter"] = 3
            optimizer.step(closure)
            optimizer.param_groups[0]["max_iter"] = 7
        assert optimizer.param_groups[0]["max_iter"] == 7
        assert optimizer.state[x]["n_iter"] == 10 and len(optimizer.state[x]["old_dirs"]) == pairs + 2
        optimizer.step(closure)
        runs.append(x.detach().clone())
    assert torch.equal(*runs)
