"""Checkpoints: atomic writes, the safe loader, one checksum over everything, exports that
never replace a training checkpoint, load_model, and the shipped checkpoints."""

import os
from pathlib import Path

import pytest
import torch

from transformer_lib import checkpoint as ck
from transformer_lib.checkpoint import (
    CheckpointError,
    check_loadable,
    checksum,
    export_for_inference,
    load_checkpoint,
    load_model,
    save_checkpoint,
    shipped_checkpoint,
)
from transformer_lib.dates import make_date_splits
from transformer_lib.search import translate
from transformer_lib.training import TrainConfig, Trainer, exact_match
from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.tokenizers import CharTokenizer

MARK = torch.full((64,), 1.2345)  # bytes easy to find in the file


@pytest.fixture
def trained(tmp_path):
    """A training checkpoint of 2 steps of a tiny model: its path and its trainer."""
    tok = CharTokenizer.train(["0123456789-abc "])
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, max_len=16))
    config = TrainConfig(
        task="dates",
        steps=2,
        max_tokens=40,
        progress=False,
        verbose=False,
        eval_limit=2,
        decode_max_len=6,
    )
    pairs = [("a1", "1"), ("b22", "22"), ("c 3", "3")]
    examples = [(tok.encode(s), tok.encode(t)) for s, t in pairs]
    trainer = Trainer(model, tok, examples, pairs, config, tmp_path / "train.pt", "cpu")
    trainer.fit()
    return tmp_path / "train.pt", trainer


def test_a_save_that_fails_midway_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"step": 1, "w": MARK})
    real_save = torch.save

    def half_then_crash(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_crash)
    with pytest.raises(OSError):
        save_checkpoint(path, {"step": 2, "w": MARK})
    monkeypatch.setattr(torch, "save", real_save)
    assert load_checkpoint(path)["step"] == 1 and os.listdir(tmp_path) == ["c.pt"]
    (tmp_path / ".c.pt.killed.tmp").write_bytes(b"left by a killed save")
    save_checkpoint(path, {"step": 3})
    assert os.listdir(tmp_path) == ["c.pt"]  # the next save removes leftovers


def test_checkpoints_load_with_weights_only_and_keep_their_values(tmp_path):
    state = {"step": 3, "w": MARK.to(torch.bfloat16), "list": [1, 2.5, None, "x"], "t": (1, 2)}
    save_checkpoint(tmp_path / "c.pt", state)
    raw = torch.load(tmp_path / "c.pt", weights_only=True)
    assert raw["checksum"] == checksum(state)
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert "checksum" not in loaded and loaded["list"] == [1, 2.5, None, "x"]
    assert loaded["w"].dtype == torch.bfloat16 and torch.equal(loaded["w"], state["w"])


def test_what_the_safe_loader_cannot_read_is_refused_naming_its_key(tmp_path):
    with pytest.raises(TypeError, match=r"state\['extra'\]\['path'\].*PosixPath"):
        save_checkpoint(tmp_path / "c.pt", {"extra": {"path": Path("x")}})
    with pytest.raises(TypeError, match=r"state\['h'\]\[1\]"):
        check_loadable({"h": [1, {2}]})
    assert not (tmp_path / "c.pt").exists()


def test_the_checksum_covers_tensors_names_dtypes_and_values():
    base = checksum({"a": {"w": MARK}, "b": [torch.zeros(2)], "s": 3})
    assert base == checksum({"s": 3, "b": [torch.zeros(2)], "a": {"w": MARK.clone()}})
    for other in (
        {"a": {"w": MARK}, "b": [torch.zeros(2, dtype=torch.int32)], "s": 3},
        {"a": {"v": MARK}, "b": [torch.zeros(2)], "s": 3},
        {"a": {"w": MARK}, "b": [torch.tensor([0.0, 1e-30])], "s": 3},
        {"a": {"w": MARK}, "b": [torch.zeros(2)], "s": 4},
    ):
        assert checksum(other) != base


def flip(path, find: bytes, offset: int, out: Path) -> Path:
    data = bytearray(Path(path).read_bytes())
    at = bytes(data).find(find)
    assert at > 0
    data[at + offset] ^= 0x10
    out.write_bytes(bytes(data))
    return out


def test_a_flipped_byte_is_refused_in_one_line(tmp_path):
    shipped = shipped_checkpoint("dates")
    name = "encoder.layers.0.self_attn.in_proj.weight"
    weight = torch.load(shipped, weights_only=True)["model"][name]
    damaged = flip(shipped, weight.numpy().tobytes()[:64], 5, tmp_path / "w.pt")
    assert not torch.equal(torch.load(damaged, weights_only=True)["model"][name], weight)
    in_tokenizer = flip(shipped, b"X\x01\x00\x00\x00-", 5, tmp_path / "t.pt")  # '-' -> '='
    for path in (damaged, in_tokenizer):
        for load in (load_checkpoint, load_model):
            with pytest.raises(CheckpointError, match=f"{path.name} is damaged") as info:
                load(path)
            assert "\n" not in str(info.value)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b"PK\x03\x04 broken zip"])
def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path, content):
    (tmp_path / "x.pt").write_bytes(content)
    with pytest.raises(CheckpointError, match="x.pt") as info:
        load_checkpoint(tmp_path / "x.pt")
    assert "\n" not in str(info.value)
    torch.save({"step": 1}, tmp_path / "plain.pt")  # no checksum: not one of ours
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(tmp_path / "plain.pt")
    with pytest.raises(FileNotFoundError, match="nowhere.pt"):
        load_checkpoint(tmp_path / "nowhere.pt")


def test_load_model_of_a_training_and_of_an_exported_checkpoint(trained, tmp_path):
    path, trainer = trained
    model, tok = load_model(path)
    assert not model.training and tok.to_dict() == trainer.tokenizer.to_dict()
    src = torch.tensor([tok.encode("b22")])
    expected = trainer.model.eval()(src, src)
    torch.testing.assert_close(model(src, src), expected)
    state = export_for_inference(path, tmp_path / "small.pt", torch.float16)
    assert state["exported"] and "optimizer" not in load_checkpoint(tmp_path / "small.pt")
    assert (tmp_path / "small.pt").stat().st_size < path.stat().st_size / 2
    small, tok2 = load_model(tmp_path / "small.pt")
    assert small.src_embed.weight.dtype == torch.float32  # computed in float32
    assert small.generator.weight is small.src_embed.weight  # still tied
    torch.testing.assert_close(small(src, src), expected, atol=0.05, rtol=0.05)
    assert translate(small, tok2, ["a1", "c 3"], max_len=6) == translate(
        model, tok, ["a1", "c 3"], max_len=6
    )


def test_an_export_never_replaces_a_training_checkpoint(trained, tmp_path):
    path, trainer = trained
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match="training checkpoint"):
        export_for_inference(path, path)
    assert path.read_bytes() == before
    export_for_inference(path, tmp_path / "small.pt")
    with pytest.raises(CheckpointError, match="exported"):
        Trainer(
            trainer.model,
            trainer.tokenizer,
            trainer.train_examples,
            trainer.valid_pairs,
            trainer.config,
            tmp_path / "small.pt",
            "cpu",
        ).resume()
    export_for_inference(path, tmp_path / "small.pt", torch.bfloat16)  # an export: replaced
    assert load_checkpoint(tmp_path / "small.pt")["extra"]["weights_dtype"] == "torch.bfloat16"


def test_the_shipped_dates_checkpoint_gets_99_percent_of_the_test_dates(dates_model):
    model, tok = dates_model
    run = load_checkpoint(shipped_checkpoint("dates"))["run"]
    test = make_date_splits(run["n_train"], run["n_valid"], run["n_test"], seed=run["seed"])["test"]
    assert len(test) == 1000
    hyps = translate(model, tok, [s for s, _ in test], max_len=16, batch_size=256)
    assert exact_match(hyps, [t for _, t in test]) >= 0.99


def test_the_shipped_bible_checkpoint_translates(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # found next to the package, from anywhere
    model, tok = load_model(shipped_checkpoint("bible-en-fr"))
    source = ["In the beginning God created the heavens and the earth.", "Jesus wept."]
    greedy, beam = translate(model, tok, source), translate(model, tok, source, beam=4)
    assert "Dieu" in greedy[0] and "terre" in beam[0] and "Jésus" in beam[1]
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path))
    (tmp_path / "dates.pt").write_bytes(b"mine")
    assert shipped_checkpoint("dates") == tmp_path / "dates.pt"  # the variable comes first
    monkeypatch.setattr(ck, "__file__", str(tmp_path / "pkg" / "checkpoint.py"))
    with pytest.raises(FileNotFoundError, match="TRANSFORMER_CHECKPOINTS"):
        shipped_checkpoint("bible-en-fr")
