"""The hidden tests of the notebooks that train and use the model (training, inference,
translation), by checker; ``tools/grading_hidden.py`` holds them all, as ``HIDDEN``, and says
how they are written (``$answer``, ``$module``, names that start with ``_``).
"""

from __future__ import annotations

from typing import Dict

USE_HIDDEN: Dict[str, str] = {
    # training
    "check_noam_lr": """\
from transformer_lib.training import noam_lr as _noam_lr
for _step, _d, _warmup in ((1, 16, 10), (10, 16, 10), (1000, 64, 100)):
    _want = _noam_lr(_step, _d, _warmup)
    assert abs($answer(_step, _d, _warmup) - _want) < 1e-12, (
        f"step {_step}, d_model {_d}, warm-up {_warmup}: {_want:.6g}")
""",
    "check_validation_cross_entropy": """\
import types as _types
import torch.nn.functional as _F
from transformer_lib import Transformer as _Transformer, TransformerConfig as _Config
torch.manual_seed(9)
_model = _Transformer(_Config.tiny(12))
_batches = []
for _b, _t in ((1, 3), (3, 5)):                                          # unequal batches
    _tgt = torch.randint(3, 12, (_b, _t + 1))
    _tgt[-1, -2:] = 0                                                    # padding
    _batches.append(_types.SimpleNamespace(src=torch.randint(3, 12, (_b, 4)),
                                           tgt_in=_tgt[:, :-1], tgt_out=_tgt[:, 1:]))
_model.eval()
with torch.no_grad():
    _sums = [_F.cross_entropy(_model(b.src, b.tgt_in).flatten(0, 1), b.tgt_out.flatten(),
                              ignore_index=0, reduction="sum") for b in _batches]
_want = float(sum(_sums)) / sum(int((b.tgt_out != 0).sum()) for b in _batches)
_model.train()
_got = float($answer(_model, _batches, 0))
assert abs(_got - _want) < 1e-4, (
    f"two batches of 3 and 15 target tokens (padding aside): {_want:.4f} nats per token, "
    f"got {_got:.4f}")
""",
    "check_label_smoothing": """\
import torch.nn.functional as _F
_g = torch.Generator().manual_seed(6)
_logits, _target = torch.randn(2, 5, 9, generator=_g), torch.randint(1, 9, (2, 5), generator=_g)
_target[1, 3:] = 0                                                       # padding, pad_id = 0
_want = _F.cross_entropy(_logits.flatten(0, 1), _target.flatten(), ignore_index=0)
assert torch.allclose(torch.as_tensor($answer(_logits, _target, 0.0, 0)), _want, atol=1e-5), (
    "epsilon = 0: the plain cross-entropy over the non-padding positions")
""",
    # inference
    "check_greedy": """\
from transformer_lib import Transformer as _Transformer, TransformerConfig as _Config
from $module import greedy_decode as _greedy_decode                  # the checker's reference
torch.manual_seed(10)
_model = _Transformer(_Config.tiny(15)).eval()
_src = torch.randint(3, 15, (3, 6))
_want = _greedy_decode(_model, _src, 3, 1, 2)                            # max_len = 3
_got = $answer(_model, _src, 3, 1, 2)
assert _got.shape == _want.shape and torch.equal(_got.long(), _want), (
    f"max_len = 3 on an untrained model: {_want.tolist()}, got {_got.tolist()}")
""",
    "check_gnmt_score": """\
assert abs($answer(-3.0, 1, 0.7) + 3.0) < 1e-9, "length 1: lp = 1, the score is log P"
assert abs($answer(-3.0, 7, 0.0) + 3.0) < 1e-9, "alpha = 0: no penalty"
""",
    "check_beam_step": """\
_g = torch.Generator().manual_seed(7)
_log_probs = torch.log_softmax(torch.randn(1, 1, 6, generator=_g), -1)  # (B, K, V)
_scores, _parent, _token = $answer(torch.zeros(1, 1), _log_probs, 1)
assert _token.item() == _log_probs[0, 0].argmax().item() and _parent.item() == 0, (
    "one hypothesis, k = 1: the greedy choice")
""",
    # translation
    "check_ngram_precision": """\
assert tuple($answer(["a", "a", "a"], ["a"], 1)) == (1, 3), "clipped: 'a' once in the reference"
assert tuple($answer(["a"], ["a", "b"], 2)) == (0, 0), "an output shorter than n: no n-gram"
""",
    "check_brevity_penalty": """\
import math as _math
assert $answer(5, 5) == 1.0 and $answer(0, 5) == 0.0, "c = r: 1.0; an empty output: 0.0"
assert abs($answer(2, 4) - _math.exp(-1)) < 1e-9, "c = 2, r = 4: exp(1 - 4/2)"
""",
    "check_repeats": """\
assert $answer(list("aaaa"), 1) == 3 and $answer(["a"], 2) == 0, "four times 'a': 3 repeats"
assert $answer("a b a b a".split(), 3) == 1, "3-grams: (a b a) comes back once"
""",
}
