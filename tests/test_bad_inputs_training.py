"""Bad inputs to training: checkpoints (what may be saved, what is loaded, damaged bytes, the
shipped files), TrainSettings, label smoothing and the Trainer. Each answers one TypeError or
ValueError naming the argument, what was given and what was expected."""

import dataclasses
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.data.batching import encode_pairs
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.training.settings import TrainSettings
from transformer_lib.training.trainer import Trainer
from transformer_lib.training.checkpoint import (
    CheckpointError,
    UncheckedCheckpointWarning,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from transformer_lib.training.loss import LabelSmoothingLoss, smoothed_targets
from transformer_lib.training.schedule import make_optimizer, noam_lr

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [("ab", "ba"), ("abc", "cba"), ("ca", "ac"), ("bb", "bb")]
TOK = CharTokenizer.train(["abc"])
CONFIG = TransformerConfig.tiny(TOK.vocab_size, P_drop=0.0, max_len=16)


def model_state(**config_changes):
    torch.manual_seed(0)
    model = Transformer(CONFIG)
    return {
        "config": {**dataclasses.asdict(CONFIG), **config_changes},
        "model": model.state_dict(),
        "src_tokenizer": TOK.to_dict(),
        "tgt_tokenizer": TOK.to_dict(),
    }


# saving: only what the safe loader reads back ---------------------------------------------
@pytest.mark.parametrize(
    "state, error, match",
    [
        ([1, 2], TypeError, r"^state must be a dict of tensors and plain values, got list$"),
        (
            {"extra": {"data_dir": Path("data")}},
            TypeError,
            r"^state\['extra'\]\['data_dir'\] is a pathlib\.\w*Path \('?\w*Path\('data'\)'?\), which "
            r"torch\.load\(weights_only=True\) cannot read back",
        ),
        ({"loss": np.float64(1.5)}, TypeError, r"^state\['loss'\] is a numpy\.float64 "),
        (
            {"history": {"loss": [1.0, object()]}},
            TypeError,
            r"^state\['history'\]\['loss'\]\[1\] is a builtins\.object",
        ),
        ({Path("k"): 1}, TypeError, r"^a key of state is a pathlib"),
    ],
)
def test_save_refuses_what_could_not_be_loaded(tmp_path, state, error, match):
    with pytest.raises(error, match=match) as info:
        save_checkpoint(tmp_path / "c.pt", state)
    assert "\n" not in str(info.value) and not (tmp_path / "c.pt").exists()


def test_save_keeps_tuples_dtypes_and_sizes(tmp_path):
    state = {
        "betas": (0.9, 0.98),
        "dtype": torch.float16,
        "shape": torch.Size([2, 3]),
        "nothing": None,
        "flags": {1: True},
    }
    save_checkpoint(tmp_path / "c.pt", state)
    assert load_checkpoint(tmp_path / "c.pt") == state


# loading a model: config and weights must fit ----------------------------------------------
@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda s: s["config"].update(colour="red"),
            r"c\.pt: its config has keys that "
            r"TransformerConfig does not know: \['colour'\]",
        ),
        (
            lambda s: s["config"].update(d_ff=72),
            r"c\.pt: its weights do not match its config: "
            r"[\w.]+feed_forward\.w_1\.weight is \(64, \d+\) in the file, \(72, \d+\) for the config",
        ),
        (
            lambda s: s["model"].pop("generator.weight"),
            r"its weights do not match its config: "
            r"missing generator\.weight",
        ),
        (lambda s: s["model"].update(extra_w=torch.zeros(1)), r"unexpected extra_w"),
        (
            lambda s: s["config"].update(N=3),
            r"its weights do not match its config: missing "
            r"encoder\.layers\.2\.[\w.]+; .*\(and \d+ more\)",
        ),
        (lambda s: s.pop("tgt_tokenizer"), r"c\.pt is not a model checkpoint: no 'tgt_tokenizer'"),
        (
            lambda s: s.update(src_tokenizer={"kind": "bpe", "json": "{"}),
            r"c\.pt: its tokenizer cannot be rebuilt: d\['json'\] is not valid JSON",
        ),
        (lambda s: s.update(config=[1]), r"c\.pt: its config is a list, not a dict"),
    ],
)
def test_load_model_names_what_does_not_fit(tmp_path, change, match):
    state = model_state()
    change(state)
    save_checkpoint(tmp_path / "c.pt", state)
    with pytest.raises(CheckpointError, match=match) as info:
        load_model(tmp_path / "c.pt")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_valid_model_checkpoint_still_loads(tmp_path):
    save_checkpoint(tmp_path / "c.pt", model_state())
    model, src, tgt = load_model(tmp_path / "c.pt")
    assert model.config == CONFIG and src.vocab_size == TOK.vocab_size


# checksums -------------------------------------------------------------------------------
def test_a_file_without_checksum_loads_with_one_warning_line(tmp_path):
    torch.save({"step": 1}, tmp_path / "old.pt")
    with pytest.warns(UncheckedCheckpointWarning) as record:
        assert load_checkpoint(tmp_path / "old.pt") == {"step": 1}
    text = str(record[0].message)
    assert "old.pt carries no checksum, so damaged bytes in it would go unnoticed" in text
    assert "save_checkpoint(path, load_checkpoint(path))" in text and "\n" not in text
    with pytest.warns(UncheckedCheckpointWarning):
        save_checkpoint(tmp_path / "old.pt", load_checkpoint(tmp_path / "old.pt"))  # the cure
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(tmp_path / "old.pt") == {"step": 1}


def test_values_are_covered_by_the_checksum(tmp_path):
    """Not only tensors: a changed tokenizer character is refused too."""
    path = tmp_path / "c.pt"
    save_checkpoint(path, model_state())
    raw = torch.load(path, weights_only=True)
    raw["src_tokenizer"]["chars"][0] = "z"  # the checksum kept as it was
    torch.save(raw, path)
    with pytest.raises(CheckpointError, match=r"c\.pt is damaged: its contents no longer match"):
        load_checkpoint(path)


def test_a_tensor_only_checksum_of_older_files_is_still_verified(tmp_path):
    from transformer_lib.training.state_integrity import tensor_checksum

    state = {"w": torch.arange(4.0), "step": 2}
    torch.save({**state, "checksum": tensor_checksum(state)}, tmp_path / "c.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(tmp_path / "c.pt")["step"] == 2
    torch.save({**state, "w": torch.ones(4), "checksum": tensor_checksum(state)}, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="is damaged"):
        load_checkpoint(tmp_path / "c.pt")


@pytest.mark.parametrize("name", ["dates.pt", "bible-en-fr.pt"])
def test_shipped_checkpoints_carry_a_checksum(name):
    raw = torch.load(ROOT / "checkpoints" / name, weights_only=True, mmap=True)
    assert str(raw["checksum"]).startswith("sha256")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'carries no checksum' warning
        load_checkpoint(ROOT / "checkpoints" / name)


def test_a_flipped_bit_in_the_shipped_dates_checkpoint_is_refused_in_one_line(tmp_path):
    shipped = ROOT / "checkpoints" / "dates.pt"
    weight = torch.load(shipped, weights_only=True)["model"][
        "encoder.layers.0.self_attn.in_proj.weight"
    ]
    data = bytearray(shipped.read_bytes())
    at = bytes(data).find(weight.numpy().tobytes()[:64])
    assert at > 0
    data[at + 5] ^= 0x10  # one bit of one encoder weight
    copy = tmp_path / "dates.pt"
    copy.write_bytes(bytes(data))
    assert not torch.equal(
        torch.load(copy, weights_only=True)["model"]["encoder.layers.0.self_attn.in_proj.weight"],
        weight,
    )  # torch.load alone: unnoticed
    for load in (load_checkpoint, load_model):
        with pytest.raises(CheckpointError) as info:
            load(copy)
        assert str(info.value) == (
            f"{copy} is damaged: its contents no longer match the "
            "checksum written with them; resume from an earlier copy "
            "or train again"
        )


def test_a_flipped_bit_in_the_shipped_tokenizer_is_refused(tmp_path):
    shipped = ROOT / "checkpoints" / "dates.pt"
    data = bytearray(shipped.read_bytes())
    at = bytes(data).find(b"X\x01\x00\x00\x00-")  # the pickled character '-' of a tokenizer
    assert at > 0
    data[at + 5] ^= 0x01  # '-' becomes ','
    copy = tmp_path / "dates.pt"
    copy.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"dates\.pt is damaged: its contents no longer"):
        load_model(copy)


# TrainSettings ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(bleu_tokenize="bogus"),
            ValueError,
            r"^bleu_tokenize must be one of 'none', .*'13a'.*'char'.*, got 'bogus'$",
        ),
        (dict(steps=True), TypeError, r"^steps must be an integer, got True \(bool\)$"),
        (dict(steps=10.0), TypeError, r"^steps must be an integer, got 10.0 \(float\)$"),
        (dict(steps=0), ValueError, r"^steps must be at least 1, got 0$"),
        (dict(lr_factor=-1.0), ValueError, r"^lr_factor must be in \(0.0, inf\], got -1.0$"),
        (dict(lr_factor=0), ValueError, r"^lr_factor must be in \(0.0, inf\], got 0.0$"),
        (dict(lr_factor=math.nan), ValueError, r"^lr_factor must be a finite number, got nan$"),
        (dict(lr_factor=math.inf), ValueError, r"^lr_factor must be a finite number, got inf$"),
        (dict(lr_factor="1"), TypeError, r"^lr_factor must be a number, got '1' \(str\)$"),
        (dict(eval_limit=-1), ValueError, r"^eval_limit must be at least 1, got -1$"),
        (dict(eval_limit=0), ValueError, r"^eval_limit must be at least 1, got 0$"),
        (dict(eval_limit=2.5), TypeError, r"^eval_limit must be an integer"),
        (dict(label_smoothing=1.0), ValueError, r"^label_smoothing must be in \[0.0, 1.0\)"),
        (dict(label_smoothing=math.nan), ValueError, r"^label_smoothing must be a finite number"),
        (dict(seed=-1), ValueError, r"^seed must be at least 0, got -1$"),
        (dict(seed=2**40), ValueError, r"^seed must be at most 4294967295"),
        (dict(bf16="no"), TypeError, r"^bf16 must be True or False, got 'no' \(str\)$"),
        (dict(verbose=1), TypeError, r"^verbose must be True or False, got 1 \(int\)$"),
        (dict(decode_max_len=0), ValueError, r"^decode_max_len must be at least 1, got 0$"),
        (dict(warmup=-5), ValueError, r"^warmup must be at least 1, got -5$"),
        (dict(time_budget=math.inf), ValueError, r"^time_budget \(minutes\) must be a finite"),
        (dict(checkpoint=""), ValueError, r"^checkpoint must be None \(no checkpoint\) or a file"),
        (
            dict(checkpoint=3),
            TypeError,
            r"^checkpoint must be None or a path \(str\), got 3 \(int\)",
        ),
        (dict(progress="yes"), ValueError, r"^progress must be True, False or 'notebook'"),
    ],
)
def test_train_settings_refuse_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        TrainSettings(**kwargs)
    assert "\n" not in str(info.value)


def test_a_path_as_checkpoint_is_stored_as_str(tmp_path):
    assert TrainSettings(checkpoint=tmp_path / "c.pt").checkpoint == str(tmp_path / "c.pt")


# label smoothing -------------------------------------------------------------------------
LOGITS = torch.randn(2, 3, 5)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: LabelSmoothingLoss()(LOGITS, torch.full((2, 3), 5)),
            ValueError,
            r"^target holds ids outside the vocabulary \[0, 5\): min 5, max 5$",
        ),
        (
            lambda: LabelSmoothingLoss()(LOGITS, torch.full((2, 3), -1)),
            ValueError,
            r"^target holds ids outside the vocabulary \[0, 5\): min -1, max -1$",
        ),
        (
            lambda: LabelSmoothingLoss()(LOGITS, torch.ones(2, 3)),
            TypeError,
            r"^target must hold integer class ids \(torch.long\), got dtype torch.float32$",
        ),
        (
            lambda: LabelSmoothingLoss()(LOGITS, [[1, 2, 3]] * 2),
            TypeError,
            r"^target must be a tensor of class ids, got list$",
        ),
        (
            lambda: LabelSmoothingLoss()(LOGITS.long(), torch.ones(2, 3, dtype=torch.long)),
            TypeError,
            r"^logits must be a float tensor \(B, T, V\), got torch.int64$",
        ),
        (
            lambda: LabelSmoothingLoss(ignore_index=7)(LOGITS, torch.ones(2, 3, dtype=torch.long)),
            ValueError,
            r"^ignore_index must be at most 4, got 7$",
        ),
        (lambda: LabelSmoothingLoss(math.nan), ValueError, r"^epsilon must be a finite number"),
        (lambda: LabelSmoothingLoss(-0.1), ValueError, r"^epsilon must be in \[0.0, 1.0\)"),
        (
            lambda: LabelSmoothingLoss(ignore_index=True),
            TypeError,
            r"^ignore_index must be an integer",
        ),
        (
            lambda: smoothed_targets(torch.tensor([7]), 5),
            ValueError,
            r"^target holds ids outside the vocabulary \[0, 5\): min 7, max 7$",
        ),
        (lambda: smoothed_targets(torch.tensor([1.0]), 5), TypeError, r"^target must hold integer"),
        (
            lambda: smoothed_targets(torch.tensor([1]), 5.0),
            TypeError,
            r"^vocab_size must be an integer",
        ),
        (
            lambda: smoothed_targets(torch.tensor([1]), 5, math.inf),
            ValueError,
            r"^epsilon must be a finite number, got inf$",
        ),
    ],
    ids=lambda v: "" if callable(v) or isinstance(v, type) else v[:40],
)
def test_label_smoothing_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


# Trainer --------------------------------------------------------------------------------
def trainer(tmp_path, extra=None, examples=None, **kw):
    torch.manual_seed(0)
    settings = TrainSettings(
        steps=2,
        max_tokens=40,
        warmup=2,
        eval_limit=2,
        decode_max_len=4,
        progress=False,
        verbose=False,
        bleu_tokenize="char",
        checkpoint=str(tmp_path / "c.pt"),
    )
    args = dict(
        model=Transformer(CONFIG),
        src_tok=TOK,
        tgt_tok=TOK,
        train_examples=encode_pairs(PAIRS, TOK, TOK) if examples is None else examples,
        valid_pairs=PAIRS[:2],
        settings=settings,
        device="cpu",
        extra=extra,
    )
    return Trainer(**{**args, **kw})


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            dict(extra={"data_dir": Path("data")}),
            TypeError,
            r"^extra\['data_dir'\] is a pathlib\.\w*Path .* cannot read back, so the checkpoint could "
            r"never be loaded: .*\(e\.g\. str\(path\), float\(x\)\)$",
        ),
        (
            dict(extra={"scores": {"bleu": np.float32(3.0)}}),
            TypeError,
            r"^extra\['scores'\]\['bleu'\] is a numpy\.float32",
        ),
        (dict(extra=["a"]), TypeError, r"^extra must be None or a dict, got list$"),
        (dict(examples=[]), ValueError, r"^train_examples is empty: nothing to train on"),
        (dict(model="model"), TypeError, r"^model must be a transformer_lib.Transformer, got str$"),
        (dict(settings={"steps": 2}), TypeError, r"^settings must be a TrainSettings, got dict$"),
        (
            dict(src_tok="abc"),
            TypeError,
            r"^src_tok must be a tokenizer \(encode, decode, to_dict\)",
        ),
    ],
)
def test_trainer_refuses_at_construction(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        trainer(tmp_path, **kwargs)
    assert not (tmp_path / "c.pt").exists()


def test_no_validation_pair_gives_nan_scores_not_a_crash(tmp_path):
    scores = trainer(tmp_path, valid_pairs=[]).validate()
    assert all(math.isnan(scores[k]) for k in ("loss", "exact_match", "bleu"))


def test_a_plain_extra_saves_and_resumes(tmp_path):
    extra = {"data_dir": str(tmp_path), "scores": {"bleu": 1.5}, "n": [1, 2]}
    first = trainer(tmp_path, extra=extra)
    first.fit()
    again = trainer(tmp_path, extra=extra)
    again.resume()
    assert again.step == 2 and load_checkpoint(tmp_path / "c.pt")["extra"] == extra


def test_shipped_bible_checkpoint_keeps_its_scores():
    extra = load_checkpoint(ROOT / "checkpoints" / "bible-en-fr.pt")["extra"]
    assert extra["scores"]["beam"]["bleu"] == 24.48 and extra["scores"]["greedy"]["bleu"] == 22.59


def test_copy_of_shipped_dates_checkpoint_resaves_identically(tmp_path):
    """A re-save of the shipped file keeps every value (the cure the warning names)."""
    copy = tmp_path / "dates.pt"
    shutil.copy(ROOT / "checkpoints" / "dates.pt", copy)
    state = load_checkpoint(copy)
    save_checkpoint(copy, state)
    again = load_checkpoint(copy)
    assert again["extra"] == state["extra"] and all(
        torch.equal(again["model"][k], v) for k, v in state["model"].items()
    )


# the learning-rate schedule ----------------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: noam_lr(1, 64, 10, math.nan), r"^factor must be a finite number, got nan$"),
        (lambda: noam_lr(1, 64, 10, -1.0), r"^factor must be in \(0.0, inf\], got -1.0$"),
        (
            lambda: make_optimizer(torch.nn.Linear(2, 2), 64, 10, math.inf),
            r"^factor must be a finite number, got inf$",
        ),
        (
            lambda: make_optimizer(torch.nn.Linear(2, 2), 64, 0),
            r"^warmup_steps must be at least 1, got 0$",
        ),
        (lambda: noam_lr(0, 64, 10), r"^step must be at least 1, got 0$"),
    ],
)
def test_schedule_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
