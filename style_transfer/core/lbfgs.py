"""The loop's LBFGS: torch's (``LBFGS``, the tutorial's), and the same algorithm with its history stacked
(``StackedLBFGS``, ``--fast``'s), which finds each direction in a few large operations instead of hundreds and keeps
its steps in scale before it has a curvature pair.

torch's two-loop recursion walks the pairs one at a time: per pair and sweep a dot product and an update of a whole
vector, 400 small operations with 100 pairs, and on a GPU each pair's ``alpha=`` waits for the device. The recursion
only needs the pairs' products with the gradient and with each other: ``StackedLBFGS`` keeps the pairs as rows of two
matrices and their ``s_i·y_j`` and ``y_i·y_j`` (one new column an iteration), solves the two sweeps as two small
triangular systems in float64, and builds the direction with two matrix-vector products. Both read every pair twice
an iteration, so on a CPU, where that reading is the cost, neither is faster. The same direction up to rounding (but
before the first pair is stored: ``StackedLBFGS``); the rounding differs, so it is not the tutorial's path.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar, cast

import torch
from torch import optim

# torch.optim.Optimizer's methods that torch wraps in torch._disable_dynamo (a guard for torch.compile, which no run
# here uses): the wrapper's first call imports torch._dynamo, 1.3 to 1.5 s of every run's start on a 2-core CPU.
DYNAMO_GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")
CURVATURE_FLOOR = 1e-10  # a pair is stored only where y·s is above this (torch's test)
PRODUCTS = ("sy", "yy")  # the cached products of the stacked pairs, in the optimiser's state (``pairs_changed``)

_Optimizer = TypeVar("_Optimizer", bound=optim.Optimizer)


def _unguarded(cls: type[_Optimizer]) -> type[_Optimizer]:
    """``cls`` with the ``DYNAMO_GUARDED`` methods as torch wrote them, without the guard's wrapper (the same code:
    the wrapper only hands the call to ``torch._dynamo.disable(method)``). A method torch no longer wraps is left
    as it is."""
    for name in DYNAMO_GUARDED:
        method = getattr(optim.Optimizer, name)
        setattr(cls, name, getattr(method, "__wrapped__", method))
    return cls


@_unguarded
class LBFGS(optim.LBFGS):
    """The tutorial's optimiser: torch's LBFGS, started without torch._dynamo (``_unguarded``), whose ``step`` the
    loop runs as its plan says (``planned_step``)."""

    def planned_step(self, closure: Callable[[], Any], iterations: int, *, switched: bool = False) -> Any:
        """``step(closure)`` of at most ``iterations`` iterations (``core.steps.step_parts``), ``max_iter`` its own
        again after it. ``switched``: the arithmetic changed since the last evaluation (a bf16 run's float32 finish),
        so its gradient and this step's first make no curvature pair: they differ by the arithmetics' rounding, late
        in a run more than by the step between them.

        torch's ``step`` takes neither, so they go through its state for the call: a last step length of 0 makes the
        pair's ``y·s`` 0, and LBFGS stores a pair only above ``CURVATURE_FLOOR``; the rest of its memory is kept."""
        group = self.param_groups[0]
        if switched:
            self.state[self._params[0]]["t"] = 0.0
        whole, group["max_iter"] = group["max_iter"], iterations
        try:
            return self.step(closure)
        finally:
            group["max_iter"] = whole


def pairs_changed(memory: MutableMapping[str, Any]) -> None:
    """Tell a ``StackedLBFGS``'s state (``memory``) that its pairs were changed in place (``fast.basis`` rescales
    them): the products it keeps of them are worked out again at its next iteration. A torch LBFGS keeps none."""
    for key in PRODUCTS:
        memory.pop(key, None)


class StackedLBFGS(LBFGS):
    """torch's LBFGS without a line search, iteration for iteration (the same evaluations, stopping tests and state
    keys, so checkpoints and the loop's hooks see no difference), its direction found from the stacked history.

    One step differs: where a pair is not stored (its curvature ``y·s`` negative or too small) while none is, torch
    steps along the gradient at the whole learning rate, its first matrix the identity; this one scales that step by
    the pair's ``|s|/|y|``. At the start of a run with a loss of 1e9 the style loss can curve down along the
    gradient: torch's step then sent every pixel out of [0, 1], and a restart at a smaller rate did the same in float32
    (the cat in The Starry Night held to AVX2, benchmarks/NOTEBOOK.md, 2026-12-04 (sixth)).

    The state keeps torch's ``old_dirs``/``old_stps`` (the pairs' ``y`` and ``s``, oldest first) as views of the rows
    of two ``history_size x n`` matrices (``y_rows``, ``s_rows``; ``slots`` says which row holds which pair), and the
    pairs' products by row (``sy[i, j] = s_i·y_j``, ``yy``: float64). Pairs that are not views of those rows (a
    state loaded from a torch LBFGS's checkpoint, or moved to another device) are stacked again at the next iteration.
    """

    def __init__(self, params: Any, **kwargs: Any) -> None:
        if kwargs.get("line_search_fn") is not None:
            raise ValueError("StackedLBFGS has no line search: line_search_fn must be None")
        super().__init__(params, **kwargs)

    def planned_step(self, closure: Callable[[], Any], iterations: int, *, switched: bool = False) -> Any:
        return self.step(closure, max_iter=iterations, switched=switched)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's, but the pairs' float64 products come back as saved: torch casts them to the variable's dtype,
        and worked out again from the pairs they differ by rounding from those the saving run had, so a resumed run
        was not the uninterrupted one bit for bit."""
        saved = {key: value for memory in state_dict.get("state", {}).values() for key, value in memory.items()
                 if key in PRODUCTS and isinstance(value, torch.Tensor) and value.dtype == torch.float64}
        super().load_state_dict(state_dict)
        if saved and self.state:
            self.state[self._params[0]].update({key: value.to("cpu", copy=True) for key, value in saved.items()})

    @torch.no_grad()
    def step(self, closure: Callable[[], Any], *, max_iter: int | None = None,  # type: ignore[override]
             switched: bool = False) -> Any:  # LBFGS needs its closure: torch types Optimizer.step's as optional
        """One optimiser step of at most ``max_iter`` iterations (None: its group's), as torch's ``LBFGS.step``
        without a line search; ``switched``: no pair of the last gradient and this step's first (``planned_step``)."""
        group = self.param_groups[0]
        lr, max_eval = group["lr"], group["max_eval"]
        max_iter = group["max_iter"] if max_iter is None else max_iter
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with torch.enable_grad():
            first_loss = closure()
        loss = loss_value(first_loss)
        evaluations = 1
        state["func_evals"] += 1
        grad = self._gather_flat_grad()
        if grad.abs().max() <= tolerance_grad:
            return first_loss

        d, t, prev_grad, prev_loss = state.get("d"), state.get("t"), state.get("prev_flat_grad"), state.get("prev_loss")
        iterations = 0
        while iterations < max_iter:
            iterations += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = grad.neg()
                self._forget(state)
            else:
                self._stack(state, group["history_size"], like=grad)
                pairs = not (switched and iterations == 1)  # across a switch of arithmetic: no pair
                new_y = self._remember(state, grad.sub(prev_grad), d.mul(t), group["history_size"]) if pairs else None
                d = self._direction(state, grad, new_y)
            if prev_grad is None:
                prev_grad = grad.clone(memory_format=torch.contiguous_format)
            else:
                prev_grad.copy_(grad)
            prev_loss = loss
            t = min(1.0, 1.0 / float(grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
            if grad.dot(d) > -tolerance_change:  # not a descent direction
                break
            self._add_grad(t, d)
            converged = False
            if iterations != max_iter:
                with torch.enable_grad():
                    loss = loss_value(closure())
                grad = self._gather_flat_grad()
                converged = bool(grad.abs().max() <= tolerance_grad)
                evaluations += 1
                state["func_evals"] += 1
            if iterations == max_iter or evaluations >= max_eval or converged:
                break
            if d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(d=d, t=t, prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return first_loss

    @staticmethod
    def _forget(state: dict[str, Any]) -> None:
        """LBFGS's first iteration: no pairs, the first matrix the identity."""
        state.update(old_dirs=[], old_stps=[], ro=[], slots=[], H_diag=1)
        for key in ("y_rows", "s_rows", *PRODUCTS):
            state.pop(key, None)

    def _remember(self, state: dict[str, Any], y: torch.Tensor, s: torch.Tensor, history: int) -> torch.Tensor | None:
        """Store the pair ``(y, s)`` where its curvature ``y·s`` is above ``CURVATURE_FLOOR``, over the oldest when
        the history is full (the pairs stacked: ``_stack``); one not stored while none is sets the first matrix to
        ``|s|/|y|``. Returns ``y`` where it was stored (its products are ``_direction``'s to work out)."""
        ys = float(y.dot(s))
        if ys <= CURVATURE_FLOOR:
            if not state["old_dirs"]:  # no pair yet: the next step in this one's scale (see the class)
                y_norm = float(y.norm())
                if y_norm > 0:
                    state["H_diag"] = torch.tensor(float(s.norm()) / y_norm, dtype=y.dtype, device=y.device)
            return None
        slots, rows_y, rows_s = state["slots"], state["y_rows"], state["s_rows"]
        if len(slots) == history:  # full: the oldest pair's row takes the new one
            slot = slots.pop(0)
            del state["old_dirs"][0], state["old_stps"][0], state["ro"][0]
        else:
            slot = len(slots)
        rows_y[slot].copy_(y)
        rows_s[slot].copy_(s)
        slots.append(slot)
        state["old_dirs"].append(rows_y[slot])
        state["old_stps"].append(rows_s[slot])
        state["ro"].append(1.0 / ys)
        state["H_diag"] = torch.tensor(ys / float(y.dot(y)), dtype=y.dtype, device=y.device)  # torch's first matrix
        return y

    def _stack(self, state: dict[str, Any], history: int, like: torch.Tensor) -> None:
        """Make sure the pairs are rows of ``y_rows`` and ``s_rows`` (stacking them again where they are not) and that
        ``sy`` and ``yy`` hold their products."""
        pairs = list(zip(state.get("old_dirs", []), state.get("old_stps", [])))
        slots = state.get("slots", [])
        rows_y, rows_s = state.get("y_rows"), state.get("s_rows")
        stacked = (rows_y is not None and rows_s is not None and len(slots) == len(pairs)
                   and rows_y.shape[0] == history and rows_y.device == like.device
                   and all(y.data_ptr() == rows_y[k].data_ptr() and s.data_ptr() == rows_s[k].data_ptr()
                           for (y, s), k in zip(pairs, slots)))
        if not stacked:
            pairs = pairs[-history:]
            rows_y = like.new_empty((history, like.numel()))
            rows_s = like.new_empty((history, like.numel()))
            for k, (y, s) in enumerate(pairs):
                rows_y[k].copy_(y.reshape(-1))
                rows_s[k].copy_(s.reshape(-1))
            state.update(y_rows=rows_y, s_rows=rows_s, slots=list(range(len(pairs))),
                         old_dirs=[rows_y[k] for k in range(len(pairs))],
                         old_stps=[rows_s[k] for k in range(len(pairs))],
                         ro=[float(r) for r in state.get("ro", [])][-history:])
            pairs_changed(state)
        if not all(key in state and state[key].dtype == torch.float64 and state[key].device.type == "cpu"
                   for key in PRODUCTS):  # missing: pairs stacked anew, a torch LBFGS's state
            used, rows_y, rows_s = len(state["slots"]), state["y_rows"], state["s_rows"]
            state["sy"] = torch.zeros(history, history, dtype=torch.float64)
            state["yy"] = torch.zeros(history, history, dtype=torch.float64)
            if used:
                state["sy"][:used, :used] = (rows_s[:used] @ rows_y[:used].T).double().cpu()
                state["yy"][:used, :used] = (rows_y[:used] @ rows_y[:used].T).double().cpu()

    def _direction(self, state: dict[str, Any], grad: torch.Tensor, new_y: torch.Tensor | None) -> torch.Tensor:
        """The two-loop recursion's direction ``-H grad``: its first sweep (newest pair first) solves
        ``alpha_i = rho_i (s_i·q - sum_{j newer} alpha_j s_i·y_j)``, with ``q = -grad``; its second (oldest first)
        ``beta_i = rho_i (y_i·r + sum_{j older} (alpha_j - beta_j) s_j·y_i)`` with ``r = h (q - sum_j alpha_j y_j)``;
        the direction is ``r + sum_j (alpha_j - beta_j) s_j``. ``new_y``: the newest pair's ``y``, just stored. The
        pairs are stacked (``_stack``)."""
        h = float(state["H_diag"])
        if not state["old_dirs"]:
            return grad.mul(-h)
        slots = state["slots"]
        used, order = len(slots), torch.tensor(slots)
        rows_y, rows_s = state["y_rows"][:used], state["s_rows"][:used]
        # One pass over each matrix: every pair's product with the gradient and, where one was just stored, with its y.
        vectors = torch.stack((grad, new_y) if new_y is not None else (grad,)).T
        products = torch.stack((rows_s @ vectors, rows_y @ vectors)).double().cpu()  # (s or y, pair by row, vector)
        if new_y is not None:
            slot = slots[-1]
            state["sy"][:used, slot] = products[0, :, 1]
            state["yy"][:used, slot] = state["yy"][slot, :used] = products[1, :, 1]
        with_grad = products[:, order, 0]  # s_i·g and y_i·g, oldest first
        sy = state["sy"][order][:, order]  # s_i·y_j, i and j oldest first
        yy = state["yy"][order][:, order]
        rho = torch.tensor(state["ro"], dtype=torch.float64)
        newer = torch.triu(sy, diagonal=1)  # s_i·y_j for j newer than i
        eye = torch.eye(used, dtype=torch.float64)
        alpha = torch.linalg.solve_triangular(eye + rho[:, None] * newer, (rho * -with_grad[0])[:, None],
                                              upper=True)[:, 0]
        y_dot_r = h * (-with_grad[1] - yy @ alpha)
        beta = torch.linalg.solve_triangular(eye + rho[:, None] * newer.T,
                                             (rho * (y_dot_r + newer.T @ alpha))[:, None], upper=False)[:, 0]
        by_slot = torch.empty(2, used, dtype=torch.float64)
        by_slot[0, order], by_slot[1, order] = -h * alpha, alpha - beta
        by_slot = by_slot.to(grad.device, grad.dtype)
        direction = torch.addmv(grad, rows_y.T, by_slot[0], beta=-h)
        return direction.addmv_(rows_s.T, by_slot[1])


def loss_value(loss: torch.Tensor | float) -> float:
    """A loss as a float (a tensor's detached first: float() of one that requires grad warns); the loop's too."""
    return float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
