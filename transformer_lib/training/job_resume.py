"""Whether a :class:`~.job.TrainJob` continues the run a checkpoint holds: the stored job
and the new one are compared field by field.

A job is flattened to ``{"part.field": value}`` (``data.task``, ``model.d_model``,
``settings.seed``, ...), the very fields a checkpoint written by the :class:`Trainer` of
:func:`~.job.prepare` records. A resumed run must see the batches, dropout masks and
learning rates an uninterrupted one would, so every field must be equal except those in
:data:`MAY_CHANGE`. Fields one side does not record are not compared (a model override
that was not given, a setting an older checkpoint lacks). The names are the job's,
never a command line's flags.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, NamedTuple

from ..config import TransformerConfig
from .job import TrainJob

# The fields a resumed run may change: none alters the steps already taken, nor those to come
# (validation, checkpoints and the end of training only read the model; averaging has its
# own check in the trainer; the rest is where the checkpoint goes and how progress looks).
MAY_CHANGE = frozenset(
    {
        "settings.steps",
        "settings.time_budget",  # when training ends
        "settings.eval_every",
        "settings.eval_limit",
        "settings.decode_max_len",
        "settings.bleu_tokenize",  # validation
        "settings.save_every",
        "settings.checkpoint",  # checkpoints
        "settings.average_last",
        "settings.average_every",  # the final average
        "settings.progress",
        "settings.verbose",  # what is printed
        "settings.keep_freed_memory",  # speed only
    }
)


class Difference(NamedTuple):
    """One field that differs: its name (``"settings.seed"``), the new and the stored value."""

    field: str
    new: Any
    stored: Any

    @property
    def fixed(self) -> bool:
        """True for the model's fields: the weights have its shape, nothing can override it."""
        return self.field.startswith("model.")


def _flat(part: str, values: Mapping[str, Any]) -> Dict[str, Any]:
    return {f"{part}.{name}": value for name, value in values.items()}


def job_record(job: TrainJob) -> Dict[str, Any]:
    """``job`` as a checkpoint records it; a :class:`ModelSpec` gives only its overrides
    (the preset's other sizes are not the user's choice)."""
    model = (
        dataclasses.asdict(job.model)
        if isinstance(job.model, TransformerConfig)
        else job.model.overrides
    )
    return {
        **_flat("data", job.data.identity()),
        **_flat("model", model),
        **_flat("settings", dataclasses.asdict(job.settings)),
    }


def stored_record(checkpoint: Mapping[str, Any]) -> Dict[str, Any]:
    """The job a training checkpoint records: its data identity, model and settings."""
    return {
        **_flat("data", checkpoint.get("extra", {}).get("data", {})),
        **_flat("model", checkpoint.get("config", {})),
        **_flat("settings", checkpoint.get("settings", {})),
    }


def resume_differences(checkpoint: Mapping[str, Any], job: TrainJob) -> List[Difference]:
    """The fields of ``job`` that differ from the job ``checkpoint`` records, leaving out
    :data:`MAY_CHANGE` and fields only one side records; in the job's field order."""
    stored, new = stored_record(checkpoint), job_record(job)
    return [
        Difference(name, value, stored[name])
        for name, value in new.items()
        if name not in MAY_CHANGE and name in stored and stored[name] != value
    ]
