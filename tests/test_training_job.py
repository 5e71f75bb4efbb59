"""A training run as one object (transformer_lib.training.job): one function assembles it,
with one length filter that says what it left out, and errors that name the job's fields."""

import pytest
import torch

from transformer_lib import TransformerConfig
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.training.job import (
    DataSpec,
    JobError,
    ModelSpec,
    TrainJob,
    encode_split,
    prepare,
)
from transformer_lib.training.trainer import TrainSettings

SMALL = DataSpec(task="dates", n_train=50, n_valid=6, n_test=6)
SETTINGS = TrainSettings(
    steps=2, max_tokens=200, warmup=2, eval_limit=2, progress=False, verbose=False
)
MODEL = ModelSpec("tiny", {"d_model": 16, "d_ff": 32, "h": 2, "N": 1})


def test_prepare_gives_a_ready_trainer_and_the_same_model_each_time():
    run = prepare(TrainJob(SMALL, MODEL, SETTINGS), device="cpu")
    again = prepare(TrainJob(SMALL, MODEL, SETTINGS), device="cpu")
    t = run.trainer
    assert len(t.train_examples) == 50 and len(t.valid_pairs) == 6 and len(run.test_pairs) == 6
    assert t.settings.bleu_tokenize == "char" and t.extra["data"]["task"] == "dates"
    assert t.settings.decode_max_len == 10 + 10  # longest ISO date + 10
    for a, b in zip(t.model.parameters(), again.trainer.model.parameters()):
        assert torch.equal(a, b)
    assert run.left_out == {"train": 0, "valid": 0, "test": 0} and run.notes == []
    t.fit()
    assert t.step == 2


def test_one_length_filter_for_every_split_says_what_it_dropped():
    tok = CharTokenizer.train([chr(c) for c in range(32, 127)] + ["éèàçûôîäöüñ"])
    job = TrainJob(
        DataSpec(task="dates", n_train=200, n_valid=40, n_test=40),
        TransformerConfig.tiny(tok.vocab_size, d_model=16, d_ff=32, h=2, N=1, max_len=20),
        SETTINGS,
    )
    run = prepare(job, tokenizers=(tok, tok), device="cpu")
    assert run.left_out["train"] > 0 and run.left_out["valid"] > 0
    t = run.trainer
    assert len(t.valid_pairs) == len(t.valid_examples) == 40 - run.left_out["valid"]
    assert all(len(s) <= 20 and len(g) + 1 <= 20 for s, g in t.train_examples)
    fields = [f for f, _ in run.notes]
    assert "data.train" in fields and "data.valid" in fields
    assert all("--" not in m for _, m in run.notes)  # fields, never flags


def test_a_split_left_empty_is_refused_naming_it():
    tok = CharTokenizer.train(["abc"])
    with pytest.raises(JobError, match="none of its 1 sources fits") as e:
        encode_split("valid", [("abcabcabc", "a")], tok, tok, max_len=4)
    assert e.value.field == "data.valid"
    with pytest.raises(JobError, match="no training pair fits"):
        encode_split("train", [("abcabcabc", "a")], tok, tok, max_len=4)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({}, "data"),
        (dict(task="dates", corpus="bible-en-fr"), "data"),
        (dict(train_file="t.tsv"), "data.valid_file"),
        (dict(task="dates", n_train=True), "data.n_train"),
        (dict(task="dates", vocab_size=0), "data.vocab_size"),
    ],
)
def test_bad_data_specs_name_the_field(kwargs, field):
    with pytest.raises(JobError) as e:
        DataSpec(**kwargs)
    assert e.value.field == field and "--" not in str(e.value)


def test_bad_model_and_mismatched_vocabulary_name_the_field():
    with pytest.raises(JobError, match="model.preset"):
        prepare(TrainJob(SMALL, ModelSpec("huge"), SETTINGS))
    with pytest.raises(JobError, match="divisible") as e:
        prepare(TrainJob(SMALL, ModelSpec("tiny", {"d_model": 30, "h": 4}), SETTINGS))
    assert e.value.field == "model"
    with pytest.raises(JobError, match="vocabulary sizes"):
        prepare(TrainJob(SMALL, TransformerConfig.tiny(7), SETTINGS))


def test_files_that_cannot_be_read_name_the_field(tmp_path):
    bad = tmp_path / "t.tsv"
    bad.write_text("no tab\n", encoding="utf-8")
    with pytest.raises(JobError, match="line 1") as e:
        prepare(TrainJob(DataSpec(train_file=str(bad), valid_file=str(bad)), MODEL, SETTINGS))
    assert e.value.field == "data.train_file"


def test_a_model_size_of_the_wrong_type_is_a_job_error_naming_it():
    from transformer_lib.training.job import JobError, ModelSpec

    with pytest.raises(JobError) as e:
        ModelSpec("tiny", {"N": 2.0}).config(40)
    assert e.value.field == "model" and "N must be an integer, got 2.0" in str(e.value)
