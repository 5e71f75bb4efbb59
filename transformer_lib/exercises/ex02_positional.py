"""Checkers for notebook 02's exercises (positional encoding, §3.5): the similarity of two
encodings as a function of their distance, derived from the formula; the rotation M_k of a
whole table, built from the one-pair rotation; and learned positional embeddings (Table 3,
row E) as a module."""

from __future__ import annotations

import torch
from torch import nn

from ..positional import PositionalEncoding, sinusoidal_table
from . import Feedback, built_a_module, check_tensor, keeps_rng, run_learner_code
from .own_work import guard, refuses

Tensor = torch.Tensor


def _omega(d_model: int, invert: bool = False, exponent_step: int = 2) -> Tensor:
    """The (D/2,) angular frequencies 1 / 10000^(2i/d) (or a typical wrong variant)."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    power = 10000.0 ** (exponent_step * i / d_model)
    return power if invert else 1.0 / power


def _looks_like(fb: Feedback, got, candidates: dict, where=None) -> None:
    """Name the first known mistake that ``got`` equals, to float32 accuracy at large angles
    (a wrong formula in float32 drifts from its float64 twin where the angles are large:
    ``where`` picks the entries to compare)."""
    if not isinstance(got, Tensor) or not got.dtype.is_floating_point:
        return
    got = got.detach().double()
    for message, value in candidates.items():
        if got.shape == value.shape:
            a, b = (got, value) if where is None else (got[where], value[where])
            if torch.allclose(a, b, atol=1e-2, rtol=1e-3):
                fb.fail(f"looks like: {message}")
                return


# --- Exercise 1: similarity against distance ----------------------------------------------


def similarity_reference(k: Tensor, d_model: int) -> Tensor:
    """PE[p] . PE[p + k] = sum_i cos(k w_i), w_i = 1 / 10000^(2i/d): the same for every p."""
    return torch.cos(k.double()[:, None] * _omega(d_model)).sum(-1)  # (K,)


def _wrong_similarities(k: Tensor, d_model: int) -> dict:
    k = k.double()[:, None]  # (K, 1)
    w = _omega(d_model)
    every_column = 1.0 / 10000.0 ** (torch.arange(d_model, dtype=torch.float64) / d_model)
    return {
        "frequencies inverted: w_i = 1 / 10000^(2i/d), you multiplied by 10000^(2i/d)": torch.cos(
            k * _omega(d_model, invert=True)
        ).sum(-1),
        "sin in place of cos: sin(a) sin(b) + cos(a) cos(b) = cos(a - b)": torch.sin(k * w).sum(-1),
        "each pair counted twice: sin·sin + cos·cos of one pair gives ONE cos(k w_i), "
        "d_model / 2 terms in all": 2 * torch.cos(k * w).sum(-1),
        "a mean, not a sum: the dot product adds the d_model / 2 pairs' terms": torch.cos(
            k * w
        ).mean(-1),
        "one frequency per column: the two columns 2i and 2i + 1 of a pair share w_i": torch.cos(
            k * every_column
        ).sum(-1),
        "the exponent is 2i/d_model, not i/d_model (i counts the pairs)": torch.cos(
            k * _omega(d_model, exponent_step=1)
        ).sum(-1),
    }


@refuses(sinusoidal_table, rule="to compute it from the formula, without the table")
@keeps_rng
def check_similarity(similarity) -> Feedback:
    """``similarity(k, d_model)``: k (K,) int64 distances -> (K,) PE[p] . PE[p + k], from the
    formula, equal to the table's dot products for every p."""
    fb = Feedback("Exercise 1 (similarity against distance)")
    k = torch.arange(-25, 41)  # (K,): negative distances too
    for d_model in (16, 64):
        got = run_learner_code(fb, similarity, k.clone(), d_model)
        if got is None:
            return fb
        expected = similarity_reference(k, d_model)
        if not check_tensor(fb, f"similarity(k, {d_model})", got, expected, atol=1e-4):
            _looks_like(fb, got, _wrong_similarities(k, d_model), where=k.abs() <= 3)
            return fb
    fb.ok("equal to the table's dot products PE[p] . PE[p + k]: the same for every p")
    fb.ok(f"largest at k = 0, where it is d_model / 2 (a sum of {64 // 2} ones for d_model = 64)")
    fb.ok("symmetric, s(-k) = s(k): cos is even, so the encoding cannot tell before from after")
    return fb


# --- Exercise 2: the rotation of the whole table ---------------------------------------------


def reference_rotation(k: int, d_model: int, invert: bool = False) -> Tensor:
    """M_k with PE[pos + k] = M_k @ PE[pos]: 2x2 blocks [[cos, sin], [-sin, cos]] of k w_i on
    the diagonal. ``invert=True`` builds it with the inverted frequencies (a wrong answer)."""
    angle = k * _omega(d_model, invert=invert)  # (D/2,)
    c, s = torch.cos(angle), torch.sin(angle)
    blocks = [torch.stack((torch.stack((ci, si)), torch.stack((-si, ci)))) for ci, si in zip(c, s)]
    return torch.block_diag(*blocks)  # (D, D)


def _wrong_rotations(k: int, d_model: int) -> dict:
    right = reference_rotation(k, d_model)
    concat = torch.cat((torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)))
    return {
        "each block turns the wrong way (the signs of sin swapped): that is M_(-k), it moves "
        "PE[pos] back to PE[pos - k]": right.T,
        "frequencies inverted: w_i = 1 / 10000^(2i/d), you multiplied by 10000^(2i/d)": (
            reference_rotation(k, d_model, invert=True)
        ),
        "k is missing: each block turns by k w_i, not by w_i (that is M_1)": reference_rotation(
            1, d_model
        ),
        "the blocks are laid out for the concatenated [sin | cos] layout; the paper "
        "interleaves: block i acts on columns 2i and 2i + 1": right[concat][:, concat],
    }


def _block_rotation(k: int, d_model: int) -> Tensor:
    w = 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    c, s = torch.cos(k * w), torch.sin(k * w)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(s)
    M[1::2, 0::2], M[1::2, 1::2] = torch.diag(-s), torch.diag(c)
    return M


@refuses(
    reference_rotation, rule="to build M_k yourself, not with the checker's `reference_rotation`"
)
@keeps_rng
def check_rotation(make_rotation) -> Feedback:
    """``make_rotation(k, d_model)`` -> (D, D) M_k with PE[pos + k] = M_k @ PE[pos] for every
    position, built from the one-pair rotation."""
    fb = Feedback("Exercise 2 (an offset rotates the whole table)")
    pe = sinusoidal_table(60, 16, dtype=torch.float64)  # (L, D)
    results = {}
    for k, d_model in ((3, 8), (5, 16), (4, 16), (9, 16)):
        got = run_learner_code(fb, make_rotation, k, d_model)
        if got is None:
            return fb
        expected = reference_rotation(k, d_model)
        if isinstance(got, Tensor) and got.shape == (2, 2):
            fb.fail(
                f"make_rotation({k}, {d_model}) is 2x2: M_k is (d_model, d_model), one 2x2 "
                "block per pair on its diagonal"
            )
            return fb
        if not check_tensor(fb, f"make_rotation({k}, {d_model})", got, expected):
            _looks_like(fb, got, _wrong_rotations(k, d_model))
            return fb
        results[k, d_model] = got.detach().double()
    M5 = results[5, 16]
    if torch.allclose(pe[:-5] @ M5.T, pe[5:], atol=1e-9):
        fb.ok("applied to the whole table: row p of PE @ M_5ᵀ is row p + 5, for every p")
    if torch.allclose(results[4, 16] @ M5, results[9, 16], atol=1e-9):
        fb.ok("M_4 M_5 = M_9: two offsets in a row add up, as rotations do")
    if torch.allclose(M5 @ M5.T, torch.eye(16, dtype=torch.float64), atol=1e-9):
        fb.ok("M_5 M_5ᵀ = I: it is a rotation, so it keeps every encoding's length")
    return fb


# --- Exercise 3: learned positional embeddings (Table 3, row E) ----------------------------


def _find_table(module: nn.Module, max_len: int, d_model: int):
    """Name and tensor of the (max_len, d_model) table, wherever the learner stored it."""
    table = getattr(module, "pe", None)
    if isinstance(table, Tensor) and tuple(table.shape) == (max_len, d_model):
        return "pe", table
    named = list(module.named_parameters()) + list(module.named_buffers())
    named += [(n, v) for n, v in vars(module).items() if isinstance(v, Tensor)]
    for name, value in named:
        if tuple(value.shape) == (max_len, d_model):
            return name, value
    return None, None


def _check_storage(fb: Feedback, module: nn.Module, max_len: int, d_model: int):
    """The table must be a trainable parameter; returns it, or None."""
    name, table = _find_table(module, max_len, d_model)
    if table is None:
        fb.fail(f"no ({max_len}, {d_model}) table found on the module: one row per position")
        return None
    if name in dict(module.named_buffers()):
        fb.fail(
            f"'{name}' is a buffer: a buffer is never trained; learned positions are an "
            "nn.Parameter"
        )
        return None
    if not any(p is table for p in module.parameters()):
        fb.fail(
            f"'{name}' is a plain tensor: wrap it in nn.Parameter so that the optimiser sees "
            "and trains it"
        )
        return None
    if not table.requires_grad:
        fb.fail(f"'{name}' has requires_grad=False: it would never be trained")
        return None
    fb.ok(f"'{name}' is an nn.Parameter of shape ({max_len}, {d_model}): trained with the model")
    return table


def _check_init(fb: Feedback, module_cls) -> bool:
    d_model, max_len = 64, 256
    module = run_learner_code(fb, module_cls, d_model, max_len, 0.1)
    if not isinstance(module, nn.Module):
        return False
    _, table = _find_table(module, max_len, d_model)
    if table is None:
        fb.fail(f"with d_model={d_model}, max_len={max_len}: no ({max_len}, {d_model}) table")
        return False
    rms = table.detach().double().pow(2).mean().sqrt().item()
    want = d_model**-0.5
    if abs(rms / want - 1) <= 0.15:
        fb.ok(f"rows start at N(0, 1/d_model): RMS {rms:.3f} for d_model = {d_model}")
        return True
    if rms == 0:
        fb.fail("the table starts at zero: every position starts with the same vector")
    elif abs(rms - 1) <= 0.15:
        fb.fail(
            "the table starts at N(0, 1): draw it from N(0, 1/d_model), torch.randn(...) * "
            "d_model ** -0.5, small beside the scaled embeddings' RMS 1"
        )
    else:
        fb.fail(f"the table has RMS {rms:.3f}, expected about 1/sqrt(d_model) = {want:.3f}")
    return False


def _check_too_long(fb: Feedback, module: nn.Module, max_len: int, d_model: int) -> bool:
    """A sequence longer than max_len raises a ValueError that names max_len."""
    try:
        module(torch.zeros(1, max_len + 1, d_model))
    except ValueError as exc:
        if "max_len" in str(exc):
            fb.ok(f"{max_len + 1} positions with max_len = {max_len}: ValueError naming max_len")
            return True
        fb.fail(f"the ValueError for {max_len + 1} positions should name max_len, says: {exc}")
        return False
    except Exception as exc:  # the learner's own error is feedback
        fb.fail(
            f"{max_len + 1} positions with max_len = {max_len} raise {type(exc).__name__} "
            f"({str(exc)[:80]}): check the length first and raise a ValueError naming max_len"
        )
        return False
    fb.fail(
        f"{max_len + 1} positions with max_len = {max_len} gave no error: a maximum length "
        "exceeded without an error; raise a ValueError naming max_len"
    )
    return False


@refuses(
    PositionalEncoding, rule="to write the module yourself, not the library's `PositionalEncoding`"
)
@keeps_rng
def check_learned_positions(module_cls) -> Feedback:
    """``module_cls(d_model, max_len, dropout)``: a (max_len, d_model) nn.Parameter ``pe``
    from N(0, 1/d_model); forward(x) = dropout(x + pe[:L]) for x (B, L, D); a ValueError
    naming max_len when L > max_len. The same as ``PositionalEncoding(..., learned=True)``."""
    fb = Feedback("Exercise 3 (learned positional embeddings)")
    torch.manual_seed(0)
    d_model, max_len = 16, 40
    module = run_learner_code(fb, module_cls, d_model, max_len, 0.5)
    if module is None or not built_a_module(fb, module):
        return fb
    table = _check_storage(fb, module, max_len, d_model)
    if table is None:
        return fb
    x = torch.randn(2, 7, d_model)  # (B, L, D)
    module.eval()
    got = run_learner_code(fb, module, x)
    if got is None:
        if any("size of tensor" in n for n in fb.notes):
            fb.fail(
                f"the table was not sliced: add its first L rows, pe[:L] (it has {max_len} rows, "
                "the input 7 positions)"
            )
        return fb
    expected = x.double() + table.detach().double()[:7]  # (B, L, D)
    if not check_tensor(fb, "output in eval mode", got, expected):
        return fb
    library = PositionalEncoding(d_model, max_len, 0.5, learned=True).eval()
    with torch.no_grad():
        library.pe.copy_(table)
    if torch.allclose(got.detach().double(), library(x).double(), atol=1e-5):
        fb.ok("equal to PositionalEncoding(d_model, max_len, dropout, learned=True) with your rows")
    table.grad = None
    if not isinstance(got, Tensor) or not got.requires_grad:
        fb.fail("the output carries no gradient to the table: do not detach it")
        return fb
    try:
        got.sum().backward()
    except Exception as exc:  # a graph of the learner's making
        fb.fail(f"backward through your output raised {type(exc).__name__}: {exc}")
        return fb
    grad = table.grad
    if grad is None or not bool(grad[:7].ne(0).all()) or bool(grad[7:].ne(0).any()):
        fb.fail("the gradient should reach rows 0..L-1 of the table, and only those")
        return fb
    fb.ok("a batch of length 7 trains rows 0..6 only: a position never seen is never learned")
    module.train()
    ones = torch.ones(4, 30, d_model)
    out = run_learner_code(fb, module, ones)
    if out is None:
        return fb
    if not isinstance(out, Tensor) or bool(out.ne(0).all()):
        fb.fail("no dropout in training mode: apply nn.Dropout to x + pe[:L] (§5.4)")
        return fb
    fb.ok("dropout acts in training mode, not in eval mode")
    module.eval()
    if not _check_too_long(fb, module, max_len, d_model):
        return fb
    _check_init(fb, module_cls)
    return fb


class _LearnedPositions(nn.Module):
    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1):
        super().__init__()
        self.pe = nn.Parameter(torch.randn(max_len, d_model) * d_model**-0.5)  # (max_len, D)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        length = x.shape[1]
        if length > self.pe.shape[0]:
            raise ValueError(f"{length} positions do not fit max_len={self.pe.shape[0]}")
        return self.dropout(x + self.pe[:length])  # (B, L, D)


CHECKS = {
    "similarity": (check_similarity, lambda: similarity_reference),
    "rotation": (check_rotation, lambda: _block_rotation),
    "learned_positions": (check_learned_positions, lambda: _LearnedPositions),
}


guard(globals())  # an answer that is, or calls, a right answer above is refused
