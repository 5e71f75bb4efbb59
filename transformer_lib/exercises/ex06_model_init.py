"""Checker for notebook 06's exercise 5: the whole model's constructor (embeddings, positions,
stacks, output layer, weight tying, initialisation)."""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Optional

import torch
from torch import nn

from ..config import TransformerConfig
from ..model import Transformer
from . import Feedback, built_a_module, keeps_rng, run_learner_code
from .ex06_assembly import load_weights

Tensor = torch.Tensor
MODEL_NAMES = ("src_embed", "tgt_embed", "positions", "encoder", "decoder", "generator")


# Exercise 5: the whole model's constructor -------------------------------------------
@contextlib.contextmanager
def _library_init_spy(calls: list):
    """Record whether the learner's constructor calls the library's Transformer.__init__."""
    original = Transformer.__init__

    def spy(self, *args, **kwargs):
        calls.append(True)
        original(self, *args, **kwargs)

    Transformer.__init__ = spy
    try:
        yield
    finally:
        Transformer.__init__ = original


def _tying_mistake(model: nn.Module, V: int, D: int, extra: int) -> str:
    ptrs = [getattr(model, n).weight.data_ptr() for n in ("src_embed", "tgt_embed", "generator")]
    if extra == V:
        return (
            "a bias on the output projection: the tied projection is the embedding "
            "matrix itself, nn.Linear(d_model, V, bias=False)"
        )
    if extra == V * D and len(set(ptrs)) == 1:
        return (
            "the output projection shares the embedding's storage (e.g. through .data) "
            "but is a Parameter of its own, counted and updated apart: assign the "
            "Parameter itself, self.generator.weight = self.tgt_embed.weight"
        )
    if extra in (V * D, 2 * V * D):
        return (
            f"{1 + extra // (V * D)} separate V x D matrices: with one shared vocabulary "
            "the two embeddings and the output projection are one matrix (§3.4)"
        )
    return f"{extra:+,} parameters compared with the library's model"


def _xavier_mistake(model: nn.Module) -> Optional[str]:
    """Why the encoder/decoder matrices are not Xavier-uniform, or None."""
    for stack in ("encoder", "decoder"):
        for name, p in getattr(model, stack).named_parameters():
            if p.dim() < 2:
                continue
            bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))  # U(-a, a)
            std = p.detach().std().item()
            if p.detach().abs().max().item() > bound * 1.0001 or std < 0.9 * bound / math.sqrt(3):
                return (
                    f"{stack}.{name} is not Xavier-uniform (std {std:.4f}, expected "
                    f"{bound / math.sqrt(3):.4f}): apply nn.init.xavier_uniform_ to every "
                    "matrix (dim > 1) of the encoder and the decoder"
                )
    return None


def _init_mistakes(fb: Feedback, model: nn.Module, config: TransformerConfig) -> bool:
    emb = model.src_embed.weight.detach()
    if emb[config.pad_id].abs().max() > 0:
        fb.fail(
            "the padding row of the embedding is not zero: the Xavier initialisation "
            "belongs to the encoder and decoder only, TokenEmbedding keeps its own"
        )
        return False
    std = emb[1:].std().item()
    if abs(std * math.sqrt(config.d_model) - 1) > 0.1:
        fb.fail(
            f"the embedding's std is {std:.4f}, expected d_model^-0.5 = "
            f"{config.d_model**-0.5:.4f}: its N(0, 1/d_model) start was overwritten "
            "(Xavier applied to every parameter, or to the tied output projection?)"
        )
        return False
    message = _xavier_mistake(model)
    if message:
        fb.fail(message)
        return False
    return True


def _dropout_mistakes(fb: Feedback, model: nn.Module, ref: nn.Module) -> bool:
    rates = {n: m.p for n, m in ref.named_modules() if isinstance(m, nn.Dropout)}
    got = {n: m.p for n, m in model.named_modules() if isinstance(m, nn.Dropout)}
    wrong = [n for n, p in rates.items() if got.get(n, p) != p]
    if wrong:
        fb.fail(
            f"dropout rate of {wrong[0]} is {got[wrong[0]]}, expected config.P_drop = "
            f"{rates[wrong[0]]}"
        )
        return False
    return True


@keeps_rng
def check_transformer_init(model_class: Callable[[TransformerConfig], nn.Module]) -> Feedback:
    """Exercise 5: ``model_class(config)`` builds the whole model (§3, §3.4): checked by
    parameter count, tied storage, initialisation and equal outputs with copied weights."""
    fb = Feedback("Exercise 5 (the whole model's constructor, §3 and §3.4)")
    V = 400
    config = TransformerConfig.tiny(V, N=2, d_model=64, d_ff=256, h=4, P_drop=0.2, max_len=40)
    torch.manual_seed(0)
    calls: list = []
    with _library_init_spy(calls):
        model = run_learner_code(fb, model_class, config)
    if model is None or not built_a_module(fb, model):
        return fb
    if calls:
        fb.fail(
            "your constructor calls the library's Transformer.__init__: write it "
            "yourself, starting with nn.Module.__init__(self)"
        )
        return fb
    missing = [n for n in MODEL_NAMES if not isinstance(getattr(model, n, None), nn.Module)]
    if missing:
        fb.fail(
            f"missing module(s) {', '.join(missing)}: the library's forward looks for "
            f"{', '.join(MODEL_NAMES)}"
        )
        return fb
    ref = Transformer(config)
    n_ref = sum(p.numel() for p in ref.parameters())
    n_got = sum(p.numel() for p in model.parameters())
    if n_got != n_ref:
        fb.fail(
            f"{n_got:,} parameters, the library's model has {n_ref:,}: looks like: "
            + _tying_mistake(model, V, config.d_model, n_got - n_ref)
        )
        return fb
    fb.ok(f"{n_ref:,} parameters, as the library's model")
    ptrs = {n: getattr(model, n).weight.data_ptr() for n in ("src_embed", "tgt_embed", "generator")}
    if len(set(ptrs.values())) != 1:
        fb.fail(
            "the embeddings and the output projection do not share one storage (tying, "
            "§3.4): self.tgt_embed = self.src_embed, self.generator.weight = "
            "self.tgt_embed.weight"
        )
        return fb
    fb.ok("source embedding, target embedding and output projection share one storage")
    if not (_init_mistakes(fb, model, config) and _dropout_mistakes(fb, model, ref)):
        return fb
    fb.ok("Xavier-uniform matrices in the encoder and decoder, embedding N(0, 1/d_model)")
    return _same_outputs(fb, model, ref)


def _same_outputs(fb: Feedback, model: nn.Module, ref: Transformer) -> Feedback:
    if not load_weights(fb, model, ref.state_dict(), ", ".join(MODEL_NAMES)):
        return fb
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, ref.config.src_vocab_size, (2, 9), generator=g)  # (B, S)
    src[0, 6:] = ref.config.pad_id
    tgt = torch.randint(3, ref.config.tgt_vocab_size, (2, 6), generator=g)  # (B, T)
    model.eval(), ref.eval()
    with torch.no_grad():
        got = run_learner_code(fb, model, src, tgt)
        if got is None:
            return fb
        expected = ref(src, tgt)  # (B, T, V)
    if (
        not isinstance(got, Tensor)
        or got.shape != expected.shape
        or not torch.allclose(got, expected, atol=1e-4)
    ):
        fb.fail("with the library's weights copied in, the logits differ from the library's")
        return fb
    fb.ok("with copied weights, the same logits as the library's Transformer")
    return fb
