"""Checkpoints: atomic writes, safe loading, and resume == uninterrupted training."""

import random

import numpy as np
import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.training import checkpoint as ckpt_mod
from transformer_lib.training.checkpoint import (
    load_checkpoint,
    load_model,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from transformer_lib.training.loss import LabelSmoothingLoss
from transformer_lib.training.schedule import make_optimizer

CONFIG = TransformerConfig.tiny(src_vocab_size=20, P_drop=0.2, max_len=16)


def fresh():
    torch.manual_seed(123)
    model = Transformer(CONFIG)
    opt, sched = make_optimizer(model, CONFIG.d_model, warmup_steps=4, factor=1.0)
    return model, opt, sched


def train(model, opt, sched, steps):
    loss_fn = LabelSmoothingLoss(0.1, 0)
    for _ in range(steps):  # the data itself comes from the RNG: it must be restored too
        src = torch.randint(1, 20, (4, 7))
        tgt = torch.randint(1, 20, (4, 6))
        loss = loss_fn(model(src, tgt[:, :-1]), tgt[:, 1:])  # dropout draws from the RNG
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def state(model, opt, sched, step):
    return {
        "config": ckpt_mod.config_to_dict(CONFIG),
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "step": step,
        "rng": rng_state(),
    }


def test_resume_equals_uninterrupted(tmp_path):
    k, m = 3, 4
    model, opt, sched = fresh()
    torch.manual_seed(7)
    train(model, opt, sched, k + m)
    expected = {n: p.clone() for n, p in model.state_dict().items()}

    model, opt, sched = fresh()
    torch.manual_seed(7)
    train(model, opt, sched, k)
    save_checkpoint(tmp_path / "c.pt", state(model, opt, sched, k))
    torch.manual_seed(999)  # disturb everything the checkpoint must restore
    del model, opt, sched

    ck = load_checkpoint(tmp_path / "c.pt")
    model = Transformer(TransformerConfig(**ck["config"]))
    opt, sched = make_optimizer(model, CONFIG.d_model, warmup_steps=4, factor=1.0)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    set_rng_state(ck["rng"])
    assert ck["step"] == k
    train(model, opt, sched, m)
    for name, p in model.state_dict().items():
        assert torch.equal(p, expected[name]), name


def test_without_restoring_rng_the_run_differs(tmp_path):
    """The check above can fail: skipping the random state changes dropout and data."""
    model, opt, sched = fresh()
    train(model, opt, sched, 2)
    snapshot = rng_state()
    a = torch.rand(3)
    set_rng_state(snapshot)
    assert torch.equal(torch.rand(3), a)
    torch.manual_seed(5)
    assert not torch.equal(torch.rand(3), a)


def test_all_rng_states_round_trip(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian
    save_checkpoint(tmp_path / "r.pt", {"rng": rng_state()})
    expected = (random.random(), np.random.randn(), np.random.rand(), torch.rand(2))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    got = (random.random(), np.random.randn(), np.random.rand(), torch.rand(2))
    assert got[:3] == expected[:3] and torch.equal(got[3], expected[3])


def test_loads_with_weights_only(tmp_path):
    model, opt, sched = fresh()
    train(model, opt, sched, 1)
    save_checkpoint(tmp_path / "c.pt", state(model, opt, sched, 1))
    ck = torch.load(tmp_path / "c.pt", weights_only=True)  # the safe unpickler accepts it
    assert ck["step"] == 1 and ck["config"]["d_model"] == CONFIG.d_model


def test_failure_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"step": 1, "w": torch.ones(3)})
    before = path.read_bytes()

    def broken_save(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"step": 2, "w": torch.zeros(3)})
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left


def test_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load_checkpoint(tmp_path / "nope.pt")


def test_load_model_rebuilds_model_and_tokenizers(tmp_path):
    from transformer_lib.data.tokenizers import CharTokenizer

    tok = CharTokenizer.train(["abc-0123"])
    config = TransformerConfig.tiny(src_vocab_size=tok.vocab_size, max_len=16)
    model = Transformer(config)
    save_checkpoint(
        tmp_path / "m.pt",
        {
            "config": ckpt_mod.config_to_dict(config),
            "model": model.state_dict(),
            "src_tokenizer": tok.to_dict(),
            "tgt_tokenizer": tok.to_dict(),
        },
    )
    loaded, src_tok, tgt_tok = load_model(tmp_path / "m.pt")
    assert not loaded.training and loaded.config == config
    assert src_tok.encode("c-1") == tok.encode("c-1") and tgt_tok.vocab_size == tok.vocab_size
    ids = torch.tensor([[4, 5, 6]])
    model.eval()
    torch.testing.assert_close(loaded(ids, ids), model(ids, ids))
    save_checkpoint(tmp_path / "bad.pt", {"model": model.state_dict()})
    with pytest.raises(ValueError, match="config"):
        load_model(tmp_path / "bad.pt")


# checksums, files that are not checkpoints, leftovers of killed writes ------------------
from pathlib import Path  # noqa: E402

from transformer_lib.training.checkpoint import CheckpointError, remove_temporaries  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MARK = torch.full((64,), 1.2345)  # bytes easy to find in the file


def test_damaged_weight_bytes_are_refused(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"step": 3, "model": {"w": MARK.clone()}})
    data = bytearray(path.read_bytes())
    at = bytes(data).find(MARK.numpy().tobytes())
    assert at > 0
    data[at + 17] ^= 0xFF  # one flipped byte inside the tensor
    path.write_bytes(bytes(data))
    assert not torch.equal(torch.load(path, weights_only=True)["model"]["w"], MARK)  # loads
    with pytest.raises(CheckpointError, match=r"c.pt is damaged: its contents no longer match"):
        load_checkpoint(path)


def test_checksum_is_stored_and_stripped_on_load(tmp_path):
    save_checkpoint(tmp_path / "c.pt", {"step": 3, "w": MARK})
    raw = torch.load(tmp_path / "c.pt", weights_only=True)
    assert raw["checksum"].startswith("sha256-all:") and len(raw["checksum"]) == 11 + 64
    assert set(load_checkpoint(tmp_path / "c.pt")) == {"step", "w"}


def test_checksum_depends_on_every_tensor_its_name_and_dtype():
    base = ckpt_mod.checksum({"a": {"w": MARK}, "b": [torch.zeros(2)]})
    assert base == ckpt_mod.checksum({"b": [torch.zeros(2)], "a": {"w": MARK.clone()}})
    assert base != ckpt_mod.checksum({"a": {"w": MARK}, "b": [torch.zeros(2, dtype=torch.int32)]})
    assert base != ckpt_mod.checksum({"a": {"v": MARK}, "b": [torch.zeros(2)]})
    assert base != ckpt_mod.checksum({"a": {"w": MARK}, "b": [torch.tensor([0.0, 1e-30])]})


def test_old_checkpoints_without_a_checksum_still_load_with_a_warning(tmp_path):
    torch.save({"step": 1, "w": MARK}, tmp_path / "old.pt")
    with pytest.warns(ckpt_mod.UncheckedCheckpointWarning, match="old.pt carries no checksum"):
        assert load_checkpoint(tmp_path / "old.pt")["step"] == 1
    shipped = ROOT / "checkpoints" / "dates.pt"
    assert torch.load(shipped, weights_only=True)["checksum"].startswith("sha256-all:")
    assert load_model(shipped)[0].config.d_model > 0


class Hostile:
    pass


@pytest.mark.parametrize(
    "kind,message",
    [
        ("text", "is not a checkpoint, or is damaged: torch.load cannot read it"),
        ("empty", "is not a checkpoint, or is damaged"),
        ("truncated", "is not a checkpoint, or is damaged"),
        ("pickle", "holds Python objects that the safe loader"),
        ("list", "is not a checkpoint: it holds a list, not a dict"),
    ],
)
def test_a_file_that_is_not_a_checkpoint_gets_one_line(tmp_path, kind, message):
    path = tmp_path / "x.pt"
    if kind == "text":
        path.write_text("source\ttarget\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        save_checkpoint(path, {"w": MARK})
        path.write_bytes(path.read_bytes()[:200])
    elif kind == "pickle":
        torch.save({"x": Hostile()}, path)
    else:
        torch.save([1, 2], path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    text = str(info.value)
    assert message in text and str(path) in text
    assert "\n" not in text and "weights_only=False" not in text


def test_leftovers_of_killed_writes_are_removed_by_the_next_save(tmp_path):
    path = tmp_path / "c.pt"
    left = [tmp_path / ".c.pt.abc123.tmp", tmp_path / ".c.pt.zz.tmp"]
    for p in left:
        p.write_bytes(b"half")
    other = tmp_path / ".other.pt.q.tmp"  # another checkpoint's: kept
    other.write_bytes(b"x")
    save_checkpoint(path, {"step": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.pt.q.tmp", "c.pt"]
    left[0].write_bytes(b"half")
    assert remove_temporaries(path) == [left[0]] and not left[0].exists()
