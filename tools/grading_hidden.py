"""The hidden tests of the graded notebooks (tools/grading.py), by checker.

Each runs in the test cell after the exercise's checker passed, between ``### BEGIN HIDDEN
TESTS`` and ``### END HIDDEN TESTS``: students do not see it, ``nbgrader autograde`` puts it back.
``$answer`` is the learner's function or class (the checker's first argument), ``$module`` the
module that defines the checker. Each assertion says what it tried, so that a failure tells
the student and the instructor why. Names start with ``_``: the notebook's own are untouched.
References come from the library, never from the notebook's own solution.

``MODEL_HIDDEN`` (here) tests the notebooks that build the model, ``USE_HIDDEN``
(``tools/grading_hidden_use.py``) those that train and use it; ``HIDDEN`` holds both.
"""

from __future__ import annotations

from typing import Dict

from tools.grading_hidden_use import USE_HIDDEN

MODEL_HIDDEN: Dict[str, str] = {
    # embeddings
    "check_text_to_ids": """\
from $module import VOCAB as _vocab, reference_encode as _reference
for _sentence, _length in (("The Cat sat", 6), ("a mat", 4), ("dog on the zebra", 9)):
    _got = torch.as_tensor($answer(_sentence, _vocab, _length))
    _want = _reference(_sentence, _vocab, _length)
    assert torch.equal(_got, _want), (
        f"$answer({_sentence!r}, vocab, {_length}) gave {_got.tolist()}, expected "
        f"{_want.tolist()} (words are lower-cased before the look-up)")""",
    "check_embedding_grad": """\
_ids = torch.tensor([[6, 0, 6], [3, 6, 1]])                              # (B, L): 6 three times
_grad_out = torch.randn(2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
_table = torch.zeros(7, 4, dtype=torch.float64, requires_grad=True)      # (V, D)
torch.nn.functional.embedding(_ids, _table).backward(_grad_out)
_got = $answer(_ids, _grad_out, 7)
assert isinstance(_got, torch.Tensor) and _got.shape == (7, 4), (
    f"for ids (2, 3), grad_out (2, 3, 4) and V = 7 the gradient should be (7, 4), got "
    f"{getattr(_got, 'shape', type(_got).__name__)}")
assert torch.allclose(_got.double(), _table.grad), (
    "V = 7, float64: token 6 occurs three times, its row should be the sum of its three "
    "gradients, and the rows of 2, 4 and 5 (never used) zero")""",
    "check_scaled_embedding": """\
import math as _math
_module = $answer(12, 25, 3)                                             # pad_id = 3
_ids = torch.tensor([[3, 1, 11, 3]])                                     # (B, L)
_out = _module(_ids)
_table = next(m for m in _module.modules() if isinstance(m, torch.nn.Embedding)).weight
assert _out.shape == (1, 4, 25), f"output shape {tuple(_out.shape)}, expected (1, 4, 25)"
assert torch.allclose(_out, _table[_ids] * _math.sqrt(25)), "d_model = 25: not scaled by 5"
assert _out[0, 0].abs().max() == 0 and _out[0, 3].abs().max() == 0, (
    "with pad_id = 3 the <pad> vectors should be zero")""",
    # the positional encoding
    "check_sinusoidal_table": """\
from transformer_lib import sinusoidal_table as _table
for _shape in ((1, 2), (37, 6)):
    _got = $answer(*_shape)
    assert isinstance(_got, torch.Tensor) and _got.shape == _shape, (
        f"$answer{_shape} should be a tensor of shape {_shape}")
    assert torch.allclose(_got.double(), _table(*_shape).double(), atol=1e-5), (
        f"$answer{_shape} differs from the sinusoidal table")
""",
    "check_positional_module": """\
from transformer_lib import sinusoidal_table as _table
_module = $answer(10, 50, 0.0).eval()
_out = _module(torch.zeros(2, 7, 10))                                    # (B, L, D)
assert torch.allclose(_out, _table(50, 10)[:7].expand(2, 7, 10), atol=1e-6), (
    "d_model = 10, L = 7: x + PE[:7] expected")
assert not any(p.shape == (50, 10) for p in _module.parameters()), (
    "the table should be a buffer, not a parameter")
assert any(b.shape == (50, 10) for b in _module.buffers()), "the (max_len, D) table: a buffer"
""",
    "check_rotation": """\
from transformer_lib import sinusoidal_table as _table
_pe = _table(20, 8, dtype=torch.float64)                                 # (L, D)
_m3 = torch.as_tensor($answer(3, 8), dtype=torch.float64)
assert torch.allclose(_pe[:17] @ _m3.T, _pe[3:], atol=1e-6), (
    "d_model = 8, k = 3: M_k PE_pos should be PE_(pos+k)")
_m0 = torch.as_tensor($answer(0, 8), dtype=torch.float64)
assert torch.allclose(_m0, torch.eye(8, dtype=torch.float64), atol=1e-9), "k = 0: the identity"
""",
    # attention
    "check_scaled_dot_product": """\
from transformer_lib.attention import attention as _attention
_g = torch.Generator().manual_seed(3)
_q, _k, _v = (torch.randn(2, 3, 4, 5, generator=_g) for _ in range(3))   # (B, H, T, d_k)
_mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
_mask[1, 0, 2] = False                                                   # a fully masked query
_out, _weights = $answer(_q, _k, _v, _mask)
_want_out, _want_weights = _attention(_q, _k, _v, _mask)
assert not torch.isnan(_out).any(), "a fully masked query gives NaN"
assert torch.allclose(_weights, _want_weights, atol=1e-5), "4-d inputs, a masked row: weights"
assert torch.allclose(_out, _want_out, atol=1e-5), "4-d inputs, a fully masked row: output"
""",
    "check_split_merge": """\
_x = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(4))   # (B, L, D)
_heads = $answer(_x, 3)
assert _heads.shape == (2, 3, 5, 4), f"split: shape {tuple(_heads.shape)}, expected (2, 3, 5, 4)"
assert torch.equal(_heads, _x.view(2, 5, 3, 4).transpose(1, 2)), "head i: features 4i..4i+3"
assert torch.equal(merge_heads(_heads), _x), "merge_heads(split_heads(x, 3)) should be x"
""",
    "check_torch_mha": """\
from transformer_lib import MultiHeadAttention as _MHA
torch.manual_seed(8)
_ours = _MHA(8, 2).eval()
_x = torch.randn(1, 4, 8)                                                # (B, T, D)
_mask = torch.ones(4, 4).tril().bool()                                   # causal, True = may attend
with torch.no_grad():
    _want, _ = _ours(_x, mask=_mask)
    _got = $answer(_ours, _x, _mask)
assert torch.allclose(_got, _want, atol=1e-5), "d_model = 8, h = 2, a causal mask: outputs differ"
""",
    "check_multi_head_attention": """\
_module = $answer(12, 3)
_out = _module(torch.randn(2, 4, 12), torch.randn(2, 6, 12), torch.randn(2, 6, 12))
assert _out.shape == (2, 4, 12), (
    f"4 queries attending to 6 keys should give (2, 4, 12), got {tuple(_out.shape)}")
""",
    # the encoder
    "check_encoder_layer": """\
_layer = $answer(8, 2, 16, 0.0).eval()
_x, _mask = torch.randn(3, 5, 8), torch.ones(3, 1, 1, 5, dtype=torch.bool)
_mask[0, ..., 3:] = False                                                # padding in row 0
_out = _layer(_x, _mask)
assert _out.shape == (3, 5, 8), f"d_model = 8, h = 2: shape {tuple(_out.shape)}, expected (3, 5, 8)"
_other = _x.clone()
_other[0, 3:] = 9.0                                                      # change only padding
assert torch.allclose(_layer(_other, _mask)[0, :3], _out[0, :3], atol=1e-5), (
    "padded positions should not change the others (the mask goes to self-attention)")
""",
    "check_feed_forward": """\
_module = $answer(6, 10)
assert sum(p.numel() for p in _module.parameters()) == 6 * 10 + 10 + 10 * 6 + 6, (
    "d_model = 6, d_ff = 10: W_1, b_1, W_2, b_2 expected (136 parameters)")
_x = torch.randn(3, 4, 6)
assert torch.allclose(_module(_x)[:, 1], _module(_x[:, 1:2])[:, 0], atol=1e-6), (
    "position-wise: each position on its own")
""",
    "check_sublayer_connection": """\
_x = torch.randn(2, 3, 4)
_norm, _drop = torch.nn.LayerNorm(4), torch.nn.Identity()
_post = $answer(_x, lambda t: 2 * t, _norm, _drop, False)
assert torch.allclose(_post, _norm(3 * _x), atol=1e-6), "post-norm: LayerNorm(x + Sublayer(x))"
_pre = $answer(_x, lambda t: 2 * t, _norm, _drop, True)
assert torch.allclose(_pre, _x + 2 * _norm(_x), atol=1e-6), "pre-norm: x + Sublayer(LayerNorm(x))"
""",
    "check_encoder_layer_params": """\
for _d, _f in ((8, 24), (3, 5)):
    _want = 4 * _d * _d + 4 * _d + 2 * _d * _f + _f + _d + 4 * _d
    assert $answer(_d, _f) == _want, f"d_model = {_d}, d_ff = {_f}: {_want} parameters"
""",
    # the decoder
    "check_decoder_layer": """\
from transformer_lib import TransformerConfig as _Config
_layer = $answer(_Config.tiny(20, d_model=8, h=2, d_ff=16)).eval()
_x, _memory = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
_out = _layer(_x, _memory)
assert _out.shape == (2, 4, 8), f"shape {tuple(_out.shape)}, expected (2, 4, 8)"
_later = _x.clone()
_later[:, 2:] = 5.0                                                      # change the future only
assert torch.allclose(_layer(_later, _memory)[:, :2], _out[:, :2], atol=1e-5), (
    "position t must not see positions after t (causal self-attention)")
""",
    "check_transformer_init": """\
from transformer_lib import Transformer as _Transformer, TransformerConfig as _Config
_config = _Config.tiny(30, 40, d_model=8, h=2, d_ff=16)                  # two vocabularies
_model = $answer(_config)
_want = sum(p.numel() for p in _Transformer(_config).parameters())
_got = sum(p.numel() for p in _model.parameters())
assert _got == _want, f"separate vocabularies (30, 40), no tying: {_want} parameters, got {_got}"
_logits = _model.eval()(torch.randint(1, 30, (2, 5)), torch.randint(1, 40, (2, 3)))
assert _logits.shape == (2, 3, 40), f"logits {tuple(_logits.shape)}, expected (2, 3, 40)"
""",
    "check_causal_mask": """\
for _t in (1, 6):
    _mask = $answer(_t)
    assert _mask.dtype == torch.bool and torch.equal(_mask, torch.ones(_t, _t).tril().bool()), (
        f"T = {_t}: True on and below the diagonal")
""",
    "check_cross_attention": """\
_g = torch.Generator().manual_seed(5)
_y, _memory = torch.randn(2, 3, 8, generator=_g), torch.randn(2, 7, 8, generator=_g)
_w = [torch.randn(8, 4, generator=_g) for _ in range(3)]
_out, _weights = $answer(_y, _memory, *_w)
assert _out.shape == (2, 3, 4) and _weights.shape == (2, 3, 7), (
    "T = 3 queries, S = 7 memory positions: (2, 3, 4) and (2, 3, 7) expected")
assert torch.allclose(_weights.sum(-1), torch.ones(2, 3), atol=1e-5), "weights sum to 1"
""",
    "check_transformer_params": """\
from transformer_lib import Transformer as _Transformer, TransformerConfig as _Config
_want = sum(p.numel() for p in _Transformer(
    _Config.tiny(50, N=1, d_model=8, d_ff=16, h=2)).parameters())
assert $answer(50, 1, 8, 16) == _want, f"V = 50, N = 1, d_model = 8, d_ff = 16: {_want}"
""",
}

HIDDEN: Dict[str, str] = {**MODEL_HIDDEN, **USE_HIDDEN}
