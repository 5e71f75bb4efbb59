"""What a :class:`~transformer_lib.training.job.TrainJob` is made of: the data
(:class:`DataSpec`) and the model (:class:`ModelSpec`), each refusing a bad field with a
:class:`JobError` that names it (``data.n_train``, ``model.preset``).

Every name here is importable from :mod:`transformer_lib.training.job` too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..checks import check_int
from ..config import TransformerConfig

Pairs = List[Tuple[str, str]]


class JobError(ValueError):
    """A job that cannot run; ``field`` is the job's field at fault (``data.valid_file``)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field, self.message = field_name, message


def job_int(value: Any, field_name: str, minimum: int, maximum: Optional[int] = None) -> int:
    """:func:`~transformer_lib.checks.check_int` for a field of the job: a :class:`JobError`
    naming the field (``data.n_train: must be at least 1, got 0``)."""
    try:
        return check_int(value, field_name, minimum, maximum)
    except (TypeError, ValueError) as e:
        raise JobError(field_name, str(e).removeprefix(f"{field_name} ")) from None


@dataclass(frozen=True)
class DataSpec:
    """What to train on: exactly one of ``task="dates"``, ``corpus="bible-en-fr"`` or
    ``train_file`` with ``valid_file`` (``source<TAB>target`` lines; ``test_file``
    optional). ``vocab_size``: the byte-pair vocabulary shared by both sides (corpora
    only; the date task uses characters)."""

    task: Optional[str] = None
    corpus: Optional[str] = None
    train_file: Optional[str] = None
    valid_file: Optional[str] = None
    test_file: Optional[str] = None
    n_train: int = 20000
    n_valid: int = 1000
    n_test: int = 1000
    vocab_size: int = 8000

    def __post_init__(self) -> None:
        given = [n for n in ("task", "corpus", "train_file") if getattr(self, n) is not None]
        if len(given) != 1:
            raise JobError(
                "data", f"give exactly one of task, corpus or train_file, got {given or 'none'}"
            )
        if self.train_file is not None and self.valid_file is None:
            raise JobError("data.valid_file", "a train_file needs a valid_file")
        for name in ("n_train", "n_valid", "n_test", "vocab_size"):
            job_int(getattr(self, name), f"data.{name}", 1)

    @property
    def bleu_tokenize(self) -> str:
        """sacrebleu's tokenizer: characters for ISO dates, ``13a`` (words) for sentences."""
        return "char" if self.task == "dates" else "13a"

    def identity(self) -> Dict[str, Any]:
        """What a resumed run must train on again (stored in the checkpoint)."""
        train_file = str(Path(self.train_file).resolve()) if self.train_file else None
        return {
            "task": self.task,
            "corpus": self.corpus,
            "train_file": train_file,
            "n_train": self.n_train if self.task else None,
        }

    def load(self) -> Dict[str, Optional[Pairs]]:
        """``{"train", "valid", "test"}`` lists of (source, target) pairs; test may be None."""
        if self.task == "dates":
            from ..data.dates import make_date_splits

            try:
                return dict(make_date_splits(self.n_train, self.n_valid, self.n_test))
            except ValueError as e:  # more held-out days than there are
                raise JobError(
                    "data.n_valid", f"{self.n_valid} (with n_test={self.n_test}): {e}"
                ) from None
        if self.task is not None:
            raise JobError("data.task", f"the built-in task is 'dates', got {self.task!r}")
        if self.corpus is not None:
            from ..data.bible import CORPORA, CorpusUnavailable, bible_en_fr

            if self.corpus not in CORPORA:
                raise JobError(
                    "data.corpus", f"must be one of {list(CORPORA)}, got {self.corpus!r}"
                )
            try:
                return dict(bible_en_fr())
            except CorpusUnavailable as e:
                raise JobError("data.corpus", str(e)) from None
        return {
            "train": _read("data.train_file", self.train_file),
            "valid": _read("data.valid_file", self.valid_file),
            "test": _read("data.test_file", self.test_file) if self.test_file else None,
        }


HEADER_NAMES = {"source", "target", "src", "tgt", "input", "output"}


def _read(field_name: str, path) -> Pairs:
    """The file's pairs; a first line of column names (``source<TAB>target``) is not a
    pair, and a file holding only that is refused."""
    from ..data.corpus import read_parallel

    try:
        pairs = read_parallel(path)
    except (ValueError, OSError) as e:
        raise JobError(field_name, str(e)) from None
    if {side.lower() for side in pairs[0]} <= HEADER_NAMES:
        if len(pairs) == 1:
            raise JobError(
                field_name,
                f"{path} holds only a header line "
                f"({pairs[0][0]!r}<TAB>{pairs[0][1]!r}), no sentence pair",
            )
        pairs = pairs[1:]
    return pairs


PRESETS = {
    "tiny": TransformerConfig.tiny,
    "base": TransformerConfig.base,
    "big": TransformerConfig.big,
}


@dataclass(frozen=True)
class ModelSpec:
    """A preset of :class:`TransformerConfig` and the fields that override it; the
    vocabulary sizes come from the tokenizers."""

    preset: str = "tiny"
    overrides: Dict[str, Any] = field(default_factory=dict)

    def config(self, vocab_size: int) -> TransformerConfig:
        if self.preset not in PRESETS:
            raise JobError("model.preset", f"must be one of {sorted(PRESETS)}, got {self.preset!r}")
        try:
            return PRESETS[self.preset](vocab_size, **self.overrides)
        except (TypeError, ValueError) as e:
            raise JobError("model", str(e)) from None
