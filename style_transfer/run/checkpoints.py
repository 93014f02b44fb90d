"""A run's checkpoints: its state after an LBFGS step saved atomically (on Ctrl-C, SIGTERM, a NaN, every N
evaluations) and read back by ``--resume``, checked against the inputs, weights and settings it was made with; the
settings a resume runs with, reconciled with those given (``resume_config``)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import torch

from ..config.run_options import RunOptions
from ..config.style import StyleConfig
from ..config.text import SETTINGS
from ..core.averaging import IterateAverage
from ..core.transfer import Resume
from ..errors import CheckpointError, first_line
from ..io import provenance
from ..io.files import atomic_output, shown
from ..io.images import ImageSource

CHECKPOINT_VERSION = 1


@dataclass
class Saved:
    """A checkpoint's contents: where the run was after one of its LBFGS steps."""

    scale: int
    evaluations_in_scale: int
    evaluations: int
    seconds: float
    image: torch.Tensor
    optimizer: dict
    plateau: list[float] = field(default_factory=list)  # progress.Plateau's running minimum, oldest first
    average: dict | None = None  # IterateAverage.state_dict() (docs/usage.md), None without averaging


def checkpoint_settings(path: str) -> dict[str, Any]:
    """What a checkpoint says about the run it holds, read before any model loads: ``{"settings": the
    settings (``provenance.settings_dict`` of its ``StyleConfig``, threads aside), "weights": the weights
    entry (``provenance.weights_entry``), "evaluations": evaluations done}``.

    ``provenance.replay_config`` turns it into the ``StyleConfig`` to resume with.

    Raises:
        CheckpointError: missing, unreadable, damaged or not ours (one line naming the file).
    """
    data = _read_checkpoint(path)
    made = data.get("fingerprint")
    if not isinstance(made, dict) or not isinstance(made.get("settings"), dict):
        raise CheckpointError(f"{shown(path)}: damaged checkpoint (no settings)")
    return {"settings": dict(made["settings"]), "weights": dict(made.get("weights") or {}),
            "evaluations": data.get("evaluations")}


def resume_config(config: StyleConfig, path: str, given: Collection[str]) -> StyleConfig:
    """The settings to resume the run saved at ``path`` with: the checkpoint's (``checkpoint_settings``), with
    ``config``'s ``threads``. Each setting of ``given`` (those the user gave explicitly, their values in ``config``)
    must agree with the checkpoint's; the inputs among them (masks, checked by hash when the run loads the
    checkpoint) and ``threads`` may be given anew, and ``weights`` may name the checkpoint's weights again (a file
    by its hash).

    Raises:
        CheckpointError: the checkpoint is missing, unreadable, damaged or not ours (one line naming the file).
        ValueError: one line from ``--resume PATH:``: a setting given that differs from the checkpoint's (naming
            its option and both values), or a weights file the checkpoint names that must be given again.
    """
    saved = checkpoint_settings(path)
    skipped = {"threads", *(s.name for s in SETTINGS if s.is_input)}
    given = [name for name in given if name not in skipped]
    where = f"--resume {shown(path)}"
    recorded = saved["weights"]
    if "weights" in given:
        mine = provenance.weights_entry(config.weights)
        if mine.get("kind") != recorded.get("kind"):
            theirs = recorded.get("name") if recorded.get("kind") == "file" else recorded.get("kind")
            raise ValueError(f"{where}: --weights {shown(config.weights)} differs from the checkpoint's "
                             f"{shown(str(theirs))}; drop --weights to continue the run as it was")
        if mine.get("kind") == "file" and mine.get("sha256") != recorded.get("sha256"):
            raise ValueError(f"{where}: --weights {shown(config.weights)} is not the weights file the run was "
                             f"made with ({shown(str(recorded.get('name')))}, SHA-256 differs)")
    for name in given:
        if name == "weights":
            continue
        ours, theirs = getattr(config, name), saved["settings"].get(name)
        theirs = tuple(theirs) if isinstance(theirs, list) else theirs
        if ours != theirs:
            flag = "--" + name.replace("_", "-")
            if isinstance(ours, bool):
                raise ValueError(f"{where}: {flag} was not given to the run the checkpoint holds; drop {flag} to "
                                 f"continue the run as it was")
            raise ValueError(f"{where}: {flag} {provenance.setting_text(ours)} differs from the checkpoint's "
                             f"{provenance.setting_text(theirs)}; drop {flag} to continue the run as it was")
    try:
        resumed = provenance.replay_config({"settings": saved["settings"], "weights": recorded},
                                           weights=config.weights if "weights" in given else None)
    except ValueError as exc:
        message = str(exc).replace("give it with weights=FILE", "give it again with weights=FILE")
        raise ValueError(f"{where}: {message}") from None
    return dataclasses.replace(resumed, threads=config.threads)


def _read_checkpoint(path: str) -> dict[str, Any]:
    """A checkpoint file's contents, checked to be a style_transfer checkpoint of this version.

    Raises:
        CheckpointError: one line naming the file.
    """
    name = shown(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{name}: no such checkpoint file") from None
    except Exception as exc:  # pickle errors, zip errors, an unsafe global refused by weights_only
        first = first_line(exc, 160)
        raise CheckpointError(f"{name}: not a readable checkpoint ({first})") from None
    if not isinstance(data, dict) or data.get("format") != "style_transfer checkpoint":
        raise CheckpointError(f"{name}: not a style_transfer checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{name}: checkpoint version {data.get('version')!r}, this version reads "
                              f"{CHECKPOINT_VERSION}")
    return data


def _same_weights(entry: dict[str, Any]) -> dict[str, Any]:
    """What makes two weights entries the same weights: a file's hash, not the name it was given by."""
    return {k: v for k, v in entry.items() if k != "name"} if entry.get("kind") == "file" else entry


def _weights_text(entry: dict[str, Any]) -> str:
    return f"the file {entry.get('name')}" if entry.get("kind") == "file" else str(entry.get("kind"))


def fingerprint(config: StyleConfig, content: ImageSource | Mapping[str, Any], styles: Sequence[ImageSource]
                ) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the settings (threads aside) and the inputs' hashes (``content``:
    a source, or its ``provenance.input_entry`` made before)."""
    settings = provenance.settings_dict(config)
    settings.pop("threads", None)
    masks = provenance.mask_inputs(settings)  # masks by name in the settings, by hash beside the inputs
    return {"settings": settings, "content": provenance.input_entry(content)["sha256"],
            "masks": {k: [e["sha256"] for e in v] if isinstance(v, list) else v["sha256"] for k, v in masks.items()},
            "styles": [provenance.input_entry(s)["sha256"] for s in styles],
            "weights": provenance.weights_entry(config.weights, model=config.model)}


class Checkpoints:
    """Snapshots of the run after each LBFGS step (only when a checkpoint file is asked for), written
    atomically every ``checkpoint_every`` evaluations and when the run stops early.

    A snapshot holds a copy of the optimiser's state (LBFGS's history: up to 100 pairs of two image
    copies), so checkpointing costs that memory once more.
    """

    def __init__(self, options: RunOptions, fingerprint: dict[str, Any]) -> None:
        self.path, self.every, self.resume = options.checkpoint, options.checkpoint_every, options.resume
        self.fingerprint = fingerprint
        self.snapshot: dict[str, Any] | None = None
        self.written_at = -1
        self.plateau: Any = None  # the early stop's window, saved with each snapshot
        self.averager: IterateAverage | None = None  # the iterate average (docs/usage.md), saved with each snapshot

    def load(self) -> Saved:
        """The checkpoint to resume, checked against this run's settings and inputs.

        Raises:
            CheckpointError: unreadable, damaged, or made by another run (named in one line).
        """
        assert self.resume is not None  # the run loads only when it resumes
        name = shown(self.resume)
        data = _read_checkpoint(self.resume)
        theirs = data.get("fingerprint", {})
        for key, what in (("content", "another content image"), ("styles", "other style image(s)"),
                          ("masks", "other masks")):
            if theirs.get(key, {}) != self.fingerprint[key]:
                raise CheckpointError(f"{name}: made with {what}; resume with the inputs it was made from")
        if _same_weights(theirs.get("weights") or {}) != _same_weights(self.fingerprint["weights"]):
            raise CheckpointError(f"{name}: made with other weights ({_weights_text(theirs.get('weights') or {})}); "
                                  f"resume with the weights it was made with")
        # The weights are compared by their entry above (a file by its hash), not by the path they were given as.
        ours = {k: v for k, v in self.fingerprint["settings"].items() if k != "weights"}
        other = {k: v for k, v in (theirs.get("settings") or {}).items() if k != "weights"}
        if ours != other:
            differ = sorted(k for k in set(ours) | set(other) if ours.get(k) != other.get(k))
            shown_values = "; ".join(f"{k}: {provenance.setting_text(other.get(k))} in the checkpoint, "
                                     f"{provenance.setting_text(ours.get(k))} here" for k in differ[:3])
            raise CheckpointError(f"{name}: made with other settings ({shown_values}); resume with the checkpoint's "
                                  f"settings")
        try:
            return Saved(int(data["scale"]), int(data["evaluations_in_scale"]), int(data["evaluations"]),
                          float(data["seconds"]), data["image"].float(), data["optimizer"],
                          [float(loss) for loss in data.get("plateau", [])], data.get("average"))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CheckpointError(f"{name}: damaged checkpoint (fields missing)") from None

    def start_scale(self, scale: int, image: torch.Tensor, evaluations: int, resume: Resume | None,
                    clock: Callable[[], float]) -> None:
        """A size starts: the state to go back to before its first LBFGS step ends."""
        if self.path is None or resume is not None:
            return  # a resumed size keeps the snapshot the checkpoint was (see save: nothing newer to write)
        self._take(scale, image, None, 0, evaluations, clock)

    def step_end(self, scale: int, image: torch.Tensor, optimizer: torch.optim.Optimizer, evaluations_in_scale: int,
                 evaluations: int, clock: Callable[[], float]) -> None:
        if self.path is None:
            return
        self._take(scale, image, optimizer, evaluations_in_scale, evaluations, clock)
        if self.every and evaluations - max(self.written_at, 0) >= self.every:
            self.save()

    def _take(self, scale: int, image: torch.Tensor, optimizer: torch.optim.Optimizer | None,
              evaluations_in_scale: int, evaluations: int, clock: Callable[[], float]) -> None:
        self.snapshot = {
            "format": "style_transfer checkpoint", "version": CHECKPOINT_VERSION, "fingerprint": self.fingerprint,
            "scale": scale, "evaluations_in_scale": evaluations_in_scale, "evaluations": evaluations,
            "seconds": clock(), "image": image.detach().to("cpu", copy=True),
            # A deep copy: LBFGS updates some of its state tensors in place during its next step.
            "optimizer": copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None,
            "plateau": list(self.plateau.best) if self.plateau is not None else [],
            "average": self.averager.state_dict() if self.averager is not None else None}

    def save(self) -> None:
        """Write the latest snapshot (atomically), unless it is the one already written."""
        if self.path is None or self.snapshot is None or self.snapshot["evaluations"] == self.written_at:
            return
        if self.snapshot["optimizer"] is None:  # a size's start: resume as a fresh optimiser
            self.snapshot["optimizer"] = {}
        with atomic_output(self.path, CheckpointError) as handle:
            torch.save(self.snapshot, handle)
        self.written_at = self.snapshot["evaluations"]

    def save_if_asked(self) -> None:
        if self.every:
            self.save()

