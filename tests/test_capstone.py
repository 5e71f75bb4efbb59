"""The capstone's worked solution, taken from the notebook's answer cells, passes the library's
checks through the adapter and learns; typical wrong models and loops are refused, each with
its mistake named."""

import math

import pytest
import torch

from transformer_lib.batching import encode_pairs
from transformer_lib.dates import make_date_splits
from transformer_lib.exercises import capstone
from transformer_lib.tokenizers import CharTokenizer

from capstone_run import worked_solution


def solution(**changes):
    """The notebook's worked solution, run as a learner's cell; ``changes`` replace text in it."""
    return worked_solution(changes.values())


@pytest.fixture(scope="module")
def worked():
    return solution()


def test_the_worked_model_passes_every_check_of_the_adapter(worked):
    feedback = capstone.check_model(worked["MyTransformer"])
    assert feedback, str(feedback)
    for what in (
        "causal",
        "padding masked",
        "each sentence alone",
        "float64",
        "encode",
        "decode",
        "tied",
    ):
        assert what in str(feedback)


def test_the_worked_loop_takes_the_library_loops_steps_and_learns(worked):
    feedback = capstone.check_training(worked["my_train"])
    assert feedback, str(feedback)
    assert "the same 14 losses" in str(feedback) and "the loss falls by more" in str(feedback)


def test_a_short_run_of_the_worked_solution_on_the_dates_lowers_the_loss(worked):
    pairs = make_date_splits(n_train=3000, n_valid=1, n_test=1, seed=0)["train"]
    tok = CharTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs])
    torch.manual_seed(0)
    model = worked["MyTransformer"](tok.vocab_size, 64, 2, 4, 256, 0.0, 64, tok.pad_id)
    losses = worked["my_train"](model, encode_pairs(pairs, tok), 100)
    assert len(losses) == 100 and all(isinstance(x, float) for x in losses)
    assert losses[0] > math.log(tok.vocab_size) - 0.5  # about a uniform guess at first
    assert sum(losses[-10:]) / 10 < 2.0


WRONG_MODELS = {  # what the mistake is -> (text replaced in the worked solution, named as)
    "future not masked": (
        (
            "dtype=torch.bool, device=tgt_in.device).tril()",
            "dtype=torch.bool, device=tgt_in.device)",
        ),
        "the decoder sees the future",
    ),
    "padding not masked": (
        (
            "src_mask = (src != self.pad_id)[:, None, None, :]                # (B, 1, 1, S)\n"
            "        x = ",
            "src_mask = (src != -1)[:, None, None, :]\n        x = ",
        ),
        "padding changes the output",
    ),
    "no sqrt(d_model) scale": (
        ("self.embed(ids) * math.sqrt(self.d_model)", "self.embed(ids)"),
        "no √d_model scale",
    ),
    "untied weights": (
        ("self.generator.weight = self.embed.weight", "pass"),
        "the weights are not tied",
    ),
}


@pytest.mark.parametrize("mistake", WRONG_MODELS)
def test_a_wrong_model_is_refused_with_its_mistake_named(mistake):
    change, named = WRONG_MODELS[mistake]
    feedback = capstone.check_model(solution(change=change)["MyTransformer"])
    assert not feedback and named in str(feedback), str(feedback)


WRONG_LOOPS = {
    "padding counted": (
        ("per_token[batch.tgt_out != pad].mean()", "per_token.mean()"),
        "padded positions are counted",
    ),
    "no warm-up schedule": (
        ("min(step ** -0.5, step * warmup ** -1.5)", "warmup ** -0.5"),
        "a constant learning rate",
    ),
    "gradients kept": (("optimizer.zero_grad()", "pass"), "never zeroed"),
    "same batch order": (("seed=seed + epoch", "seed=seed"), "the same order"),
}


@pytest.mark.parametrize("mistake", WRONG_LOOPS)
def test_a_wrong_loop_is_refused_with_its_mistake_named(mistake):
    change, named = WRONG_LOOPS[mistake]
    feedback = capstone.check_training(solution(change=change)["my_train"])
    assert not feedback and named in str(feedback), str(feedback)


def test_a_model_built_from_the_library_is_refused(worked):
    from transformer_lib.masks import padding_mask

    class Borrowed(worked["MyTransformer"]):
        def forward(self, src, tgt_in):
            return self.decode(tgt_in, self.encode(src), padding_mask(src, self.pad_id))

    feedback = capstone.check_model(Borrowed)
    assert not feedback and "without the library's layers" in str(feedback)
