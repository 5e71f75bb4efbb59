"""Training the Transformer: label smoothing, the warm-up schedule, checkpoints, metrics,
the training loop and multi-process (DDP) helpers (§5)."""

from .checkpoint import (
    CheckpointError,
    UncheckedCheckpointWarning,
    export_for_inference,
    load_checkpoint,
    load_model,
    save_checkpoint,
    shipped_checkpoint,
)
from .loss import LabelSmoothingLoss, smoothed_targets
from .metrics import bleu, evaluate_translation, exact_match
from .schedule import make_optimizer, noam_lr

__all__ = [
    "LabelSmoothingLoss",
    "smoothed_targets",
    "noam_lr",
    "make_optimizer",
    "save_checkpoint",
    "load_checkpoint",
    "load_model",
    "export_for_inference",
    "shipped_checkpoint",
    "exact_match",
    "bleu",
    "evaluate_translation",
    "CheckpointError",
    "UncheckedCheckpointWarning",
]
