"""Notebook 07 writes the training loop by hand and says that the library's Trainer takes the
very same steps. Its `train` cell, run alone, against `Trainer.fit` under one seed: the same
loss at every step, then the same weights, bit for bit."""

from pathlib import Path

import nbformat
import pytest
import torch

from transformer_lib.model import Transformer
from transformer_lib.training import TrainConfig, prepare, seed_everything

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "07_training.ipynb"
STEPS = 30  # three epochs of the 200 dates below, each one shuffled with seed + epoch


@pytest.fixture(scope="module")
def train():
    """The notebook's `train`, from the one cell that defines it (it imports what it uses)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code" and "def train(" in c.source]
    assert len(sources) == 1
    namespace = {}
    exec(compile(sources[0], f"{NOTEBOOK.name}: def train", "exec"), namespace)
    return namespace["train"]


@pytest.mark.parametrize(
    "changes",
    [{}, {"cooldown": 0.3, "lr_factor": 2.0, "label_smoothing": 0.2, "eval_every": 10}],
    ids=["defaults", "cooldown-factor-smoothing-validation"],
)
def test_the_notebooks_loop_takes_the_trainers_steps(train, changes):
    config = TrainConfig(
        task="dates", n_train=200, n_valid=8, n_test=8, d_model=32, dropout=0.1, max_len=64,
        steps=STEPS, max_tokens=250, warmup=5, seed=3, eval_limit=8, progress=False,
        verbose=False, keep_freed_memory=False, **changes,
    )  # fmt: skip
    trainer = prepare(config, device="cpu").trainer  # seeds, then builds the model
    history = trainer.fit()
    assert 2 * len(trainer.batches) < STEPS

    seed_everything(config.seed)  # the same seed, then the same model
    model = Transformer(trainer.model.config)
    losses = train(
        model, trainer.train_examples, trainer.valid_pairs, STEPS, trainer.tokenizer,
        max_tokens=config.max_tokens, warmup=config.warmup, factor=config.lr_factor,
        cooldown=config.cooldown, epsilon=config.label_smoothing, seed=config.seed,
        eval_every=config.eval_every or STEPS, log=lambda line: None,
    )  # fmt: skip

    assert losses == history["loss"]
    assert len(set(losses)) == STEPS  # dropout on: the steps differ
    for (name, ours), theirs in zip(model.named_parameters(), trainer.model.parameters()):
        assert torch.equal(ours, theirs), name
