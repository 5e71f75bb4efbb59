"""What the command-line tests share: a tiny training run's flags, the fixtures that keep
torch's thread count and refuse training, and a tiny untrained checkpoint to translate with."""

import dataclasses

import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.training import trainer as trainer_mod
from transformer_lib.training.checkpoint import save_checkpoint

TINY = [
    "--d-model",
    "16",
    "--d-ff",
    "32",
    "--layers",
    "1",
    "--heads",
    "2",
    "--max-tokens",
    "150",
    "--warmup",
    "3",
    "--eval-limit",
    "4",
    "--no-progress",
    "--threads",
    "1",
    "--no-compiled-kernels",
    "--no-keep-freed-memory",
]
DATES = ["--task", "dates", "--n-train", "60", "--n-valid", "4", "--n-test", "4", *TINY]


@pytest.fixture(autouse=True)
def restore_threads():
    """The command line sets torch's thread count (--threads); put it back afterwards."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test if training starts: the error must come before."""
    monkeypatch.setattr(trainer_mod.Trainer, "fit", lambda self: pytest.fail("trained"))


def tiny_checkpoint(path, lines):
    """Save a random (untrained) tiny model whose source vocabulary holds only the characters
    of ``lines``, and a date-digit target vocabulary; return (model, src_tok, tgt_tok)."""
    torch.manual_seed(0)
    src_tok = CharTokenizer.train(lines)
    tgt_tok = CharTokenizer.train(["0123456789-"])
    config = TransformerConfig.tiny(src_tok.vocab_size, tgt_tok.vocab_size, P_drop=0.0, max_len=16)
    model = Transformer(config)
    save_checkpoint(
        path,
        {
            "config": dataclasses.asdict(config),
            "model": model.state_dict(),
            "src_tokenizer": src_tok.to_dict(),
            "tgt_tokenizer": tgt_tok.to_dict(),
        },
    )
    return model, src_tok, tgt_tok
