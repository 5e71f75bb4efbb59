"""Checkers for notebook 02 (sinusoidal positional encoding, §3.5)."""

from __future__ import annotations

import torch
from torch import nn

from ..positional import sinusoidal_table
from ..positional import PositionalEncoding
from . import Feedback, built_a_module, check_tensor, run_learner_code
from .own_work import refuses


def _angles(max_len: int, d_model: int, exponent_step: int = 2, invert: bool = False):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)  # (D/2,)
    scale = 10000.0 ** (exponent_step * i / d_model)  # (D/2,)
    return pos * scale if invert else pos / scale  # (L, D/2)


def _interleave(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack((a, b), dim=-1).flatten(1)  # (L, D)


def wrong_tables(max_len: int, d_model: int) -> dict:
    """The classic wrong tables, each with the diagnosis a learner should read."""
    ang = _angles(max_len, d_model)
    inv = _angles(max_len, d_model, invert=True)
    half = _angles(max_len, d_model, exponent_step=1)
    return {
        "frequencies inverted: you multiplied by 10000^(2i/d) instead of dividing": _interleave(
            inv.sin(), inv.cos()
        ),
        "this is the concatenated [sin | cos] layout; the paper interleaves sin and cos "
        "(column 2i is sin, column 2i+1 is cos)": torch.cat((ang.sin(), ang.cos()), dim=-1),
        "sin and cos swapped: even columns (2i) take sin, odd columns (2i+1) take cos": _interleave(
            ang.cos(), ang.sin()
        ),
        "the exponent uses i/d_model instead of 2i/d_model (i counts sin/cos pairs)": _interleave(
            half.sin(), half.cos()
        ),
    }


def _diagnose(fb: Feedback, got: torch.Tensor, candidates: dict) -> None:
    for message, table in candidates.items():
        if got.shape == table.shape and torch.allclose(got.double(), table, atol=1e-4):
            fb.fail(message)
            return


@refuses(sinusoidal_table, rule="to write the table without calling `sinusoidal_table`")
def check_sinusoidal_table(make_table) -> Feedback:
    """``make_table(max_len, d_model)`` -> (max_len, d_model) table of §3.5 (interleaved)."""
    fb = Feedback("Exercise 1 (the sinusoidal table)")
    for max_len, d_model in ((10, 8), (50, 32)):
        got = run_learner_code(fb, make_table, max_len, d_model)
        if got is None:
            return fb
        expected = sinusoidal_table(max_len, d_model, dtype=torch.float64)
        if isinstance(got, torch.Tensor) and got.shape == (d_model, max_len):
            fb.fail(
                f"shape {tuple(got.shape)} is transposed: rows are positions, "
                f"columns dimensions ({max_len}, {d_model})"
            )
            return fb
        if not check_tensor(fb, f"table({max_len}, {d_model})", got, expected, atol=1e-4):
            if isinstance(got, torch.Tensor):
                _diagnose(fb, got.detach(), wrong_tables(max_len, d_model))
            return fb
    return fb


def _find_table(module: nn.Module, max_len: int, d_model: int):
    """Name and tensor of the (max_len, d_model) table, wherever the learner stored it."""
    for name, value in vars(module).items():
        if isinstance(value, torch.Tensor) and value.shape[-2:] == (max_len, d_model):
            return name, value
    for name, value in list(module.named_buffers()) + list(module.named_parameters()):
        if value.shape[-2:] == (max_len, d_model):
            return name, value
    return None, None


def _check_storage(fb: Feedback, module: nn.Module, max_len: int, d_model: int) -> bool:
    """The table must be a buffer: not a parameter, not a plain attribute."""
    name, table = _find_table(module, max_len, d_model)
    if table is None:
        fb.fail(f"no ({max_len}, {d_model}) table found on the module")
    elif any(p is table for p in module.parameters()):
        fb.fail(
            f"'{name}' is an nn.Parameter: the optimiser would train it; use self.register_buffer"
        )
    elif name not in dict(module.named_buffers()):
        fb.fail(
            f"'{name}' is a plain attribute: it is not in state_dict and .to(device) "
            "does not move it; use self.register_buffer"
        )
    else:
        fb.ok("the table is a buffer: saved in state_dict, moved by .to(), never trained")
        return True
    return False


@refuses(
    PositionalEncoding, rule="to write the module yourself, not the library's `PositionalEncoding`"
)
def check_positional_module(module_cls) -> Feedback:
    """``module_cls(d_model, max_len, dropout)``: adds table[:L] to (B, L, D), then dropout;
    the table is a buffer."""
    fb = Feedback("Exercise 2 (PositionalEncoding module)")
    d_model, max_len = 16, 40
    module = run_learner_code(fb, module_cls, d_model, max_len, 0.5)
    if module is None or not built_a_module(fb, module):
        return fb
    if not _check_storage(fb, module, max_len, d_model):
        return fb
    x = torch.randn(2, 7, d_model)  # (B, L, D)
    module.eval()
    got = run_learner_code(fb, module, x)
    if got is None:
        if any("size of tensor" in n for n in fb.notes):
            fb.fail(
                "slice the table to the input length: self.pe[:x.size(1)] (the table has "
                f"{max_len} rows, the input 7 positions)"
            )
        return fb
    expected = x + sinusoidal_table(max_len, d_model)[:7]  # (B, L, D)
    if not check_tensor(fb, "output in eval mode", got, expected, atol=1e-4):
        return fb
    module.train()
    out = run_learner_code(fb, module, torch.ones(2, 7, d_model))
    if out is not None and torch.allclose(out, torch.ones(2, 7, d_model) + expected - x):
        fb.fail("no dropout in training mode: apply nn.Dropout to x + PE (§5.4)")
    elif out is not None:
        fb.ok("dropout is active in training mode and off in eval mode")
    return fb


def reference_rotation(k: int, d_model: int, invert: bool = False) -> torch.Tensor:
    """M with PE[pos + k] = M @ PE[pos]: 2x2 blocks [[cos, sin], [-sin, cos]] of k * w_i.

    ``invert=True`` builds it with the inverted frequencies 10000^(2i/d) (a wrong answer).
    """
    w = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    w = w if invert else 1.0 / w  # (D/2,)
    c, s = torch.cos(k * w), torch.sin(k * w)  # (D/2,)
    blocks = [
        torch.tensor([[ci, si], [-si, ci]], dtype=torch.float64)
        for ci, si in zip(c.tolist(), s.tolist())
    ]  # (2, 2) each
    return torch.block_diag(*blocks)  # (D, D)


@refuses(
    reference_rotation, rule="to build M_k yourself, not with the checker's `reference_rotation`"
)
def check_rotation(make_rotation) -> Feedback:
    """``make_rotation(k, d_model)`` -> (D, D) matrix M with PE[pos + k] = M @ PE[pos]."""
    fb = Feedback("Exercise 3 (relative offsets are rotations)")
    d_model, k = 8, 3
    got = run_learner_code(fb, make_rotation, k, d_model)
    if got is None:
        return fb
    expected = reference_rotation(k, d_model)
    if not check_tensor(fb, f"M(k={k})", got, expected, atol=1e-5):
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            got = got.detach().double()
            if torch.allclose(got, expected.T, atol=1e-5):
                fb.fail(
                    "each 2x2 block rotates the wrong way (sin signs swapped): it maps "
                    "PE[pos] to PE[pos - k]"
                )
            elif torch.allclose(got, reference_rotation(k, d_model, invert=True), atol=1e-5):
                fb.fail("frequencies inverted: you multiplied by 10000^(2i/d) instead of dividing")
        return fb
    pe = sinusoidal_table(20, d_model, dtype=torch.float64)
    if torch.allclose(pe[5 + k], got.double() @ pe[5], atol=1e-6):
        fb.ok(f"PE[5 + {k}] == M @ PE[5]; M does not depend on the position")
    return fb
