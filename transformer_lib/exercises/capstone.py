"""Checks for the capstone (notebook 10): the learner's own Transformer and training loop,
written with ``torch`` alone, run through the library's own checks.

The adapter maps the learner's module onto the library's :class:`Transformer` of the same
configuration: the specification fixes the names of the learner's parameters (table below),
so the library's weights can be copied into the learner's model. Then both run in float64 on
the same ids and must agree to 1e-5, and the learner's model alone must be causal, ignore
source padding, and treat every sentence of a batch as if it were alone.

    learner's parameter                     library's parameter
    embed.weight (= generator.weight)       src_embed.lookup.weight (= generator.weight)
    encoder.i.self_attn.{q,k,v}.*           encoder.layers.i.self_attn.in_proj.* (rows split)
    encoder.i.self_attn.o.*                 encoder.layers.i.self_attn.out_proj.*
    encoder.i.w_1.*, encoder.i.w_2.*        encoder.layers.i.feed_forward.w_1.*, .w_2.*
    encoder.i.norm_1.*, .norm_2.*           encoder.layers.i.attn_block.norm.*, .ff_block.norm.*
    decoder.i.self_attn / cross_attn        decoder.layers.i.self_attn / cross_attn (as above)
    decoder.i.norm_1.*, .norm_2.*, .norm_3.*   decoder.layers.i.{self,cross,ff}_block.norm.*

The training loop is checked against the library's pieces (``token_batches``, the
label-smoothed loss, Eq. 3 with the cool-down, Adam with the paper's settings): on one model
and one seed both must take the same steps, in float64; and a short run must learn.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

from ..attention import MultiHeadAttention, attention, fused_attention
from ..batching import encode_pairs, token_batches
from ..config import TransformerConfig
from ..dates import make_date_splits
from ..decoder import Decoder, DecoderLayer
from ..embedding import TokenEmbedding
from ..encoder import Encoder, EncoderLayer
from ..feedforward import PositionwiseFeedForward
from ..masks import causal_mask, decoder_mask, padding_mask
from ..model import Transformer
from ..positional import PositionalEncoding, sinusoidal_table
from ..residual import ResidualNorm
from ..tokenizers import CharTokenizer
from ..training import LabelSmoothingLoss, Trainer, adam, cooldown_scale, noam_lr, smoothed_targets
from . import Feedback, built_a_module, check_tensor, first_match, keeps_rng, run_learner_code
from .ex06_decoder import model_variant
from .own_work import guard, refuses

Tensor = torch.Tensor
NORMS = {"encoder": ("attn_block", "ff_block"),
         "decoder": ("self_block", "cross_block", "ff_block")}
SIZES = dict(vocab_size=40, d_model=32, N=2, h=4, d_ff=64, dropout=0.1, max_len=32, pad_id=0)


# ------------------------------------------------------------------------ the adapter
def library_config(vocab_size: int, d_model: int, N: int, h: int, d_ff: int, dropout: float,
                   max_len: int, pad_id: int) -> TransformerConfig:
    """The library's configuration of a ``MyTransformer(...)`` built with these arguments."""
    return TransformerConfig.tiny(vocab_size, N=N, d_model=d_model, d_ff=d_ff, h=h,
                                  P_drop=dropout, max_len=max_len, pad_id=pad_id)


def expected_keys(N: int) -> List[str]:
    """The parameter names the specification asks for (the buffer ``pe`` aside)."""
    keys = ["embed.weight", "generator.weight"]
    for stack, attns, norms in (("encoder", ("self_attn",), 2),
                                ("decoder", ("self_attn", "cross_attn"), 3)):
        for i in range(N):
            for attn in attns:
                keys += [f"{stack}.{i}.{attn}.{p}.{w}" for p in "qkvo" for w in ("weight", "bias")]
            keys += [f"{stack}.{i}.{m}.{w}" for m in ("w_1", "w_2") for w in ("weight", "bias")]
            keys += [f"{stack}.{i}.norm_{n}.{w}" for n in range(1, norms + 1)
                     for w in ("weight", "bias")]
    return keys


def library_tensor(key: str, state: Dict[str, Tensor], d_model: int) -> Tensor:
    """The library's tensor for the learner's parameter ``key`` (see the module's table)."""
    if key == "embed.weight":
        return state["src_embed.lookup.weight"]
    if key == "generator.weight":
        return state["generator.weight"]
    stack, i, part, *rest = key.split(".")
    base = f"{stack}.layers.{i}"
    if part in ("self_attn", "cross_attn"):
        proj, what = rest
        if proj == "o":
            return state[f"{base}.{part}.out_proj.{what}"]
        j = "qkv".index(proj)
        return state[f"{base}.{part}.in_proj.{what}"][j * d_model:(j + 1) * d_model]
    if part in ("w_1", "w_2"):
        return state[f"{base}.feed_forward.{part}.{rest[0]}"]
    block = NORMS[stack][int(part[len("norm_"):]) - 1]
    return state[f"{base}.{block}.norm.{rest[0]}"]


def copy_library_weights(fb: Feedback, model: nn.Module, ref: Transformer) -> bool:
    """Copy the library model's weights into the learner's; record why they do not fit."""
    c = ref.config
    try:
        keys = [k for k in model.state_dict() if k != "pe"]
    except Exception as err:  # the learner's module decides what state_dict does
        fb.fail(f"your module's state_dict() raised {type(err).__name__}: {err}")
        return False
    wanted = expected_keys(c.N)
    extra = [k for k in keys if k not in wanted]
    missing = [k for k in wanted if k not in keys]
    if extra or missing:
        said = []
        if missing:
            said.append(f"missing {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
        if extra:
            said.append(f"not in the specification {', '.join(extra[:4])}"
                        f"{' ...' if len(extra) > 4 else ''}")
        fb.fail("your parameters do not have the specification's names (its table), so the "
                "checks cannot copy weights into them: " + "; ".join(said))
        return False
    state = ref.state_dict()
    try:
        with torch.no_grad():
            params = dict(model.named_parameters(remove_duplicate=False))
            for key in wanted:
                source = library_tensor(key, state, c.d_model)
                if key not in params or params[key].shape != source.shape:
                    shape = tuple(params[key].shape) if key in params else None
                    fb.fail(f"{key} has shape {shape}, the specification's is "
                            f"{tuple(source.shape)}")
                    return False
                params[key].copy_(source)
    except Exception as err:
        fb.fail(f"copying the weights into your model failed: {type(err).__name__}: {err}")
        return False
    return True


def tied(model: nn.Module) -> bool:
    embed, generator = getattr(model, "embed", None), getattr(model, "generator", None)
    return (isinstance(getattr(embed, "weight", None), Tensor)
            and getattr(generator, "weight", None) is embed.weight)


def _output(fb: Feedback, what: str, fn: Callable, *args) -> Optional[Tensor]:
    with torch.no_grad():
        got = run_learner_code(fb, fn, *args)
    if got is None:
        return None
    if not isinstance(got, Tensor):
        fb.fail(f"{what} should return a tensor, got {type(got).__name__}")
        return None
    if not got.is_floating_point():
        fb.fail(f"{what} should return floating-point scores, got dtype {got.dtype}")
        return None
    return got.detach().double()


def _same(a: Optional[Tensor], b: Tensor) -> bool:
    return a is not None and a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def _inputs(pad: int):
    g = torch.Generator().manual_seed(5)
    src = torch.randint(4, SIZES["vocab_size"], (3, 7), generator=g)  # (B, S)
    src[0, 5:] = pad
    src[2, 3:] = pad
    tgt = torch.randint(4, SIZES["vocab_size"], (3, 6), generator=g)  # (B, T)
    tgt[:, 0] = 1  # <s>
    tgt[1, 4:] = pad
    return src, tgt


MODEL_MISTAKES = {
    "no causal mask: each target position sees the tokens after it": dict(causal="none"),
    "the causal mask upside down (triu for tril): each position sees the future, not the past":
        dict(causal="triu"),
    "the source padding mask is missing, in the encoder and in cross-attention":
        dict(enc_mask=False, cross_mask=False),
    "the cross-attention does not get the source padding mask": dict(cross_mask=False),
    "the encoder's self-attention does not get the source padding mask": dict(enc_mask=False),
    "the target's padding is not masked: the decoder's mask is causal AND target padding":
        dict(tgt_padding=False),
    "no positional encoding on the source": dict(src_positions=False),
    "no positional encoding on the target": dict(tgt_positions=False),
    "no √d_model scale: the embeddings are multiplied by sqrt(d_model) (§3.4)":
        dict(scaled=False),
    "softmax at the end: the model returns logits": dict(out="softmax"),
    "log_softmax at the end: the model returns logits": dict(out="log_softmax"),
}


def _named_mistake(fb: Feedback, got: Tensor, ref: Transformer, src: Tensor,
                   tgt: Tensor) -> None:
    with torch.no_grad():
        variants = {m: model_variant(ref, src, tgt, **kw) for m, kw in MODEL_MISTAKES.items()}
        concat = Transformer(ref.config.replace(pe_layout="concat")).double().eval()
        concat.load_state_dict({k: v for k, v in ref.state_dict().items()
                                if k != "positions.pe"}, strict=False)
        variants["the sinusoids as [sin | cos] halves: §3.5 interleaves them, sin in the even "
                 "columns, cos in the odd ones"] = concat(src, tgt)
    message = first_match(got, variants)
    if message:
        fb.fail(f"looks like: {message}")


LAYERS = (Transformer, Encoder, Decoder, EncoderLayer, DecoderLayer, MultiHeadAttention,
          attention, fused_attention, TokenEmbedding, PositionalEncoding, sinusoidal_table,
          PositionwiseFeedForward, ResidualNorm, padding_mask, causal_mask, decoder_mask)


@refuses(*LAYERS, rule="to write the model with torch alone, without the library's layers")
@keeps_rng
def check_model(model_class) -> Feedback:
    """``model_class(vocab_size, d_model, N, h, d_ff, dropout, max_len, pad_id)`` with the
    specification's parameter names; ``forward(src, tgt_in)`` -> logits (B, T, V),
    ``encode(src)`` -> memory (B, S, D), ``decode(tgt_in, memory, src_mask)`` -> logits."""
    fb = Feedback("Exercise 1 (your Transformer)")
    try:
        _check_model(fb, model_class)
    except Exception as err:  # never raise on an answer, whatever it does
        fb.fail(f"the check could not run your model: {type(err).__name__}: {err}")
    return fb


def _check_model(fb: Feedback, model_class) -> None:
    torch.manual_seed(0)
    model = run_learner_code(fb, model_class, **SIZES)
    if model is None or not built_a_module(fb, model):
        return
    if not tied(model):
        fb.fail("the weights are not tied: the generator's weight must be the embedding's own "
                "tensor, self.generator.weight = self.embed.weight (§3.4)")
        return
    torch.manual_seed(1)
    ref = Transformer(library_config(**SIZES)).double().eval()
    model.double()
    if not copy_library_weights(fb, model, ref):
        return
    ours = sum(p.numel() for p in ref.parameters())
    theirs = sum(p.numel() for p in model.parameters())
    if theirs != ours:
        fb.fail(f"your model has {theirs:,} parameters, the specification's {ours:,}")
        return
    fb.ok(f"the specification's parameters ({ours:,}), generator tied to the embedding")
    model.eval()
    src, tgt = _inputs(SIZES["pad_id"])
    got = _output(fb, "forward(src, tgt_in)", model, src, tgt)
    if got is None:
        return
    with torch.no_grad():
        expected = ref(src, tgt)  # (B, T, V)
    if got.shape != expected.shape:
        fb.fail(f"forward returns shape {tuple(got.shape)}, expected logits (B, T, V) = "
                f"{tuple(expected.shape)}")
        return
    later = tgt.clone()
    later[0, 3:] = 7  # sentence 0's tokens 3.. changed
    moved = _output(fb, "forward(src, tgt_in)", model, src, later)
    if moved is None:
        return
    if _same(moved[0, :3], got[0, :3]):
        fb.ok("changing target tokens 3.. leaves the logits of positions 0-2 alone (causal)")
    else:
        fb.fail("the decoder sees the future: changing target tokens 3.. changed the logits "
                "of positions 0-2 (mask the decoder's self-attention with a lower-triangular "
                "mask)")
    padded = torch.cat((src, torch.full((3, 3), SIZES["pad_id"])), dim=1)  # 3 more pads
    more = _output(fb, "forward(src, tgt_in)", model, padded, tgt)
    if more is None:
        return
    if _same(more, got):
        fb.ok("three more padding tokens on the source change nothing (padding masked)")
    else:
        fb.fail("padding changes the output: three more padding tokens on the source changed "
                "the logits (mask the padded source keys in the encoder and in cross-attention)")
    alone = []
    for b in range(src.shape[0]):
        S, T = int((src[b] != 0).sum()), int((tgt[b] != 0).sum())
        one = _output(fb, "forward(src, tgt_in)", model, src[b:b + 1, :S], tgt[b:b + 1, :T])
        if one is None:
            return
        alone.append(_same(one[0], got[b, :T]))
    if all(alone):
        fb.ok("each sentence alone gets the logits it gets in the batch")
    else:
        fb.fail(f"a batch mixes its sentences: sentence {alone.index(False)} alone gets other "
                "logits than in the batch (look at how the heads are split and merged)")
    if check_tensor(fb, "logits against the library's Transformer, same weights, float64", got,
                    expected):
        memory = _output(fb, "encode(src)", getattr(model, "encode", None), src)
        if memory is None:
            return
        with torch.no_grad():
            memory_ref = ref.encode(src)
            src_mask = padding_mask(src, SIZES["pad_id"])  # (B, 1, 1, S)
            logits_ref = ref.decode(tgt, memory_ref, src_mask)
        if not check_tensor(fb, "encode(src), the memory", memory, memory_ref):
            return
        logits = _output(fb, "decode(tgt_in, memory, src_mask)", getattr(model, "decode", None),
                         tgt, memory_ref, src_mask)
        if logits is not None:
            check_tensor(fb, "decode(tgt_in, memory, src_mask)", logits, logits_ref)
        return
    _named_mistake(fb, got, ref, src, tgt)


class _Attention(nn.Module):
    def __init__(self, d_model: int, h: int):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        B, T, D = x.shape
        split = lambda t: t.view(B, -1, self.h, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(memory)), split(self.v(memory))  # (B, H, L, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, H, T, L)
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.o((weights @ v).transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class _Layer(nn.Module):
    """An encoder layer (``cross=False``) or a decoder layer, post-norm."""

    def __init__(self, d_model: int, h: int, d_ff: int, dropout: float, cross: bool):
        super().__init__()
        self.self_attn = _Attention(d_model, h)
        if cross:
            self.cross_attn = _Attention(d_model, h)
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        for n in range(1, 3 + cross):
            setattr(self, f"norm_{n}", nn.LayerNorm(d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor, memory=None, memory_mask=None) -> Tensor:
        norms = [self.norm_1, self.norm_2] + ([self.norm_3] if memory is not None else [])
        x = norms[0](x + self.dropout(self.self_attn(x, x, mask)))
        if memory is not None:
            x = norms[1](x + self.dropout(self.cross_attn(x, memory, memory_mask)))
        ff = self.w_2(self.dropout(torch.relu(self.w_1(x))))  # Eq. 2
        return norms[-1](x + self.dropout(ff))


class MyTransformer(nn.Module):
    """A right answer for exercise 1 (the notebook's worked solution, written compactly)."""

    def __init__(self, vocab_size: int, d_model: int = 64, N: int = 2, h: int = 4,
                 d_ff: int = 256, dropout: float = 0.1, max_len: int = 64, pad_id: int = 0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        self.generator.weight = self.embed.weight
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000.0 ** (
            -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (max_len, D/2)
        pe = torch.stack((angles.sin(), angles.cos()), -1).flatten(1)  # interleaved
        self.register_buffer("pe", pe.float())
        self.encoder = nn.ModuleList(_Layer(d_model, h, d_ff, dropout, False) for _ in range(N))
        self.decoder = nn.ModuleList(_Layer(d_model, h, d_ff, dropout, True) for _ in range(N))
        self.dropout = nn.Dropout(dropout)
        for p in [*self.encoder.parameters(), *self.decoder.parameters()]:
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)
        with torch.no_grad():
            self.embed.weight[pad_id] = 0.0

    def embed_with_positions(self, ids: Tensor) -> Tensor:
        x = self.embed(ids) * math.sqrt(self.d_model) + self.pe[:ids.shape[1]]
        return self.dropout(x)  # (B, L, D)

    def encode(self, src: Tensor) -> Tensor:
        x, mask = self.embed_with_positions(src), (src != self.pad_id)[:, None, None, :]
        for layer in self.encoder:
            x = layer(x, mask)
        return x  # (B, S, D)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor) -> Tensor:
        T = tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()
        mask = causal & (tgt_in != self.pad_id)[:, None, None, :]  # (B, 1, T, T)
        y = self.embed_with_positions(tgt_in)
        for layer in self.decoder:
            y = layer(y, mask, memory, src_mask)
        return self.generator(y)  # (B, T, V)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return self.decode(tgt_in, self.encode(src), (src != self.pad_id)[:, None, None, :])


# ------------------------------------------------------------------------ the training loop
def reference_train(model: nn.Module, examples, steps: int, max_tokens: int = 1000,
                    warmup: int = 200, factor: float = 0.5, cooldown: float = 0.2,
                    epsilon: float = 0.1, seed: int = 0, mistake: str = "") -> List[float]:
    """The specification's loop with the library's pieces (07's loop without validation);
    ``mistake`` names one of :data:`LOOP_MISTAKES` to take a typical wrong step instead."""
    d_model, pad = model.d_model, model.pad_id
    betas, eps = ((0.9, 0.999), 1e-8) if mistake == "adam" else ((0.9, 0.98), 1e-9)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=betas, eps=eps)
    losses: List[float] = []
    model.train()
    for epoch in itertools.count():
        same_order = mistake == "epoch"
        for batch in token_batches(examples, max_tokens, True, seed + (0 if same_order else epoch),
                                   pad):
            step = len(losses) + 1
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss = _smoothed_loss(logits, batch.tgt_out, epsilon, pad, mistake)
            if mistake != "no zero_grad":
                optimizer.zero_grad()
            loss.backward()
            if mistake == "constant":
                lr = factor * (d_model * warmup) ** -0.5
            else:
                lr = noam_lr(step, d_model, warmup, factor)
            if mistake != "no cooldown":
                done = step if mistake == "cooldown late" else step - 1
                lr *= cooldown_scale(done / steps, cooldown)
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            losses.append(loss.item())
            if step == steps:
                return losses
    return losses


def _smoothed_loss(logits: Tensor, target: Tensor, epsilon: float, pad: int,
                   mistake: str = "") -> Tensor:
    """§5.4 in the logits' own dtype (LabelSmoothingLoss computes in float32)."""
    V = logits.shape[-1]
    log_p = logits.log_softmax(-1)  # (B, T, V)
    if mistake == "all V":
        q = torch.full_like(log_p, epsilon / V)
        q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_p[..., :1], 1 - epsilon))
    else:
        eps = 0.0 if mistake == "no smoothing" else epsilon
        q = torch.full_like(log_p, eps / (V - 1))
        q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_p[..., :1], 1 - eps))
        q[..., pad] = 0.0
    per_token = -(q * log_p).sum(-1)  # (B, T)
    if mistake == "padding counted":
        return per_token.mean()
    if mistake == "sum":
        return per_token[target != pad].sum()
    return per_token[target != pad].mean()


LOOP_MISTAKES = {
    "padding counted": "the padded positions are counted in the loss: average only over the "
                       "positions whose target is not padding",
    "no smoothing": "no label smoothing: this is the plain cross-entropy",
    "all V": "epsilon is spread over all V classes; the padding class gets no mass: spread "
             "it over the V - 1 others",
    "sum": "the loss is the sum over the target tokens, not their mean",
    "no zero_grad": "the gradients are never zeroed: they add up from step to step",
    "constant": "a constant learning rate: Eq. 3 warms up, then decays",
    "no cooldown": "no cool-down: the rate must fall linearly to 0 over the last `cooldown` "
                   "share of the steps",
    "cooldown late": "the cool-down starts one step late: step s has done (s - 1) / steps of "
                     "the run",
    "adam": "Adam with PyTorch's default betas and eps: the paper's are (0.9, 0.98) and 1e-9",
    "epoch": "every epoch takes the batches in the same order: pass seed + epoch to "
             "token_batches",
}


def _tiny_dates(n: int, seed: int):
    pairs = make_date_splits(n_train=n, n_valid=1, n_test=1, seed=seed)["train"]
    tok = CharTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs])
    return encode_pairs(pairs, tok), tok.vocab_size


def _losses(fb: Feedback, fn, model, examples, steps: int, **kwargs) -> Optional[List[float]]:
    got = run_learner_code(fb, fn, model, [(list(s), list(t)) for s, t in examples], steps,
                           **kwargs)
    if got is None:
        return None
    try:
        losses = [float(x) for x in got]
    except (TypeError, ValueError):
        fb.fail(f"return the list of the losses of every step (floats), got "
                f"{type(got).__name__}")
        return None
    if len(losses) != steps:
        fb.fail(f"{steps} steps asked, {len(losses)} losses returned: take exactly `steps` "
                "steps, one loss each")
        return None
    return losses


SAME = dict(max_tokens=120, warmup=4, factor=1.0, cooldown=0.5, epsilon=0.1, seed=3)


@refuses(LabelSmoothingLoss, smoothed_targets, noam_lr, cooldown_scale, adam, Trainer,
         rule="to write the loop with torch alone, without the library's training pieces")
@keeps_rng
def check_training(fn) -> Feedback:
    """``fn(model, examples, steps, max_tokens, warmup, factor, cooldown, epsilon, seed)`` ->
    the loss of every step: the same steps as the library's loop (float64, no dropout), and a
    short run whose loss falls."""
    fb = Feedback("Exercise 2 (your training loop)")
    try:
        _check_training(fb, fn)
    except Exception as err:  # never raise on an answer
        fb.fail(f"the check could not run your loop: {type(err).__name__}: {err}")
    return fb


def _check_training(fb: Feedback, fn) -> None:
    examples, V = _tiny_dates(40, seed=1)
    examples = [(t, s) for s, t in examples]  # ISO -> written: targets of many lengths, padded
    torch.manual_seed(0)
    start = MyTransformer(V, d_model=16, N=1, h=2, d_ff=32, dropout=0.0, max_len=48).double()
    steps = 14
    got = _losses(fb, fn, copy.deepcopy(start), examples, steps, **SAME)
    if got is None:
        return
    expected = reference_train(copy.deepcopy(start), examples, steps, **SAME)
    close = [math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7) for a, b in zip(got, expected)]
    if all(close):
        fb.ok(f"the same {steps} losses as the library's loop from the same model and seed: "
              "batches, loss, Eq. 3 with warm-up and cool-down, Adam (0.9, 0.98, 1e-9)")
    else:
        k = close.index(False)
        where = ("at step 1, before any update: the loss itself differs" if k == 0 else
                 f"the first {k} steps agree, step {k + 1} differs: the update differs")
        fb.fail(f"your losses are not the library loop's ({where}; yours {got[k]:.6f}, "
                f"expected {expected[k]:.6f})")
        for key, message in LOOP_MISTAKES.items():
            wrong = reference_train(copy.deepcopy(start), examples, steps, mistake=key, **SAME)
            if all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7) for a, b in zip(got, wrong)):
                fb.fail(f"looks like: {message}")
                break
        return
    examples, V = _tiny_dates(300, seed=2)
    torch.manual_seed(0)
    model = MyTransformer(V, d_model=32, N=1, h=2, d_ff=64, dropout=0.0, max_len=48)
    got = _losses(fb, fn, model, examples, 60, max_tokens=400, warmup=10, factor=1.0,
                  cooldown=0.2, epsilon=0.1, seed=0)
    if got is None:
        return
    first, last = got[0], sum(got[-10:]) / 10
    if last < 0.6 * first:
        fb.ok("60 steps on 300 dates: the loss falls by more than 40 % (the mean of the last "
              "10 steps against the first)")
    else:
        fb.fail(f"60 steps on 300 dates: the loss goes from {first:.2f} to {last:.2f}, it "
                f"should fall below {0.6 * first:.2f}")


def my_train(model: nn.Module, examples, steps: int, max_tokens: int = 1000, warmup: int = 200,
             factor: float = 0.5, cooldown: float = 0.2, epsilon: float = 0.1,
             seed: int = 0) -> List[float]:
    """A right answer for exercise 2."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    pad, losses = model.pad_id, []
    model.train()
    for epoch in itertools.count():
        for batch in token_batches(examples, max_tokens, True, seed + epoch, pad):
            step = len(losses) + 1
            loss = _smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, epsilon, pad)
            optimizer.zero_grad()
            loss.backward()
            lr = factor * model.d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
            lr *= min(1.0, (1 - (step - 1) / steps) / cooldown) if cooldown > 0 else 1.0
            for group in optimizer.param_groups:
                group["lr"] = lr
            optimizer.step()
            losses.append(loss.item())
            if step == steps:
                return losses
    return losses


CHECKS = {
    "model": (check_model, lambda: MyTransformer),
    "training": (check_training, lambda: my_train),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
