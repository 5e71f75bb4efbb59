"""The numbers that the prose of notebooks 03 and 04 states, computed from the library, and
the shape of those notebooks' exercises (posed, stub, check, hidden solution).

When the library changes, these fail before the prose silently goes wrong."""
import contextlib
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from transformer_lib import Encoder, TransformerConfig, attention
from transformer_lib.params import count_parameters, ffn_params, formula_counts

from notebook_cells import cells, source

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def best_time(fn, repeats: int = 5) -> float:
    """The fastest of ``repeats`` calls, in seconds (the machine's attainable time)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@contextlib.contextmanager
def one_thread():
    """Time on one core: scaling exponents, not thread start-up, are what is measured."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --- notebook 03, sections 3 and 4: additive vs dot-product, the sqrt(d_k) ---------------
def softmax_grad_norm(scores):
    w = scores.softmax(-1)                                                  # (N, T)
    jac = torch.diag_embed(w) - w[..., :, None] * w[..., None, :]           # (N, T, T)
    return jac.flatten(1).norm(dim=1).mean().item()


@pytest.mark.parametrize("d", [4, 64, 1024])
def test_variance_of_q_dot_k_is_d_k_and_one_after_scaling(d):
    q, k = torch.randn(2000, 16, d), torch.randn(2000, 16, d)
    raw = (q * k).sum(-1)
    assert abs(raw.var().item() / d - 1) < 0.05
    assert abs((raw / math.sqrt(d)).var().item() - 1) < 0.05


def test_unscaled_softmax_saturates_and_its_gradient_falls_sixfold():
    stats = {}
    for d in (4, 1024):
        q, k = torch.randn(2000, 16, d), torch.randn(2000, 16, d)
        raw = (q * k).sum(-1)
        W_q, W_k = torch.randn(d, 64) / math.sqrt(d), torch.randn(d, 64) / math.sqrt(d)
        additive = torch.tanh(q @ W_q + k @ W_k) @ (torch.randn(64) / 8)
        stats[d] = dict(max_raw=raw.softmax(-1).amax(-1).mean().item(),
                        grad_raw=softmax_grad_norm(raw),
                        grad_scaled=softmax_grad_norm(raw / math.sqrt(d)),
                        grad_add=softmax_grad_norm(additive))
    assert abs(stats[4]["max_raw"] - 0.50) < 0.03 and abs(stats[1024]["max_raw"] - 0.96) < 0.02
    assert 4.5 < stats[4]["grad_raw"] / stats[1024]["grad_raw"] < 8            # "about sixfold"
    for key in ("grad_scaled", "grad_add"):                                   # "stay level"
        assert 0.8 < stats[4][key] / stats[1024][key] < 1.25


def test_additive_hidden_layer_is_d_a_times_the_score_table_and_slower():
    T, d_k, d_a = 256, 64, 64
    Q, K = torch.randn(T, d_k), torch.randn(T, d_k)
    W_q, W_k, w = torch.randn(d_k, d_a), torch.randn(d_k, d_a), torch.randn(d_a)
    hidden = torch.tanh((Q @ W_q)[:, None, :] + (K @ W_k)[None, :, :])       # (T, T, d_a)
    scores = Q @ K.T
    assert hidden.nbytes == 16 * 2**20 and scores.nbytes == 2**18           # 16 and 0.25 MiB
    assert hidden.nbytes // scores.nbytes == d_a == 64

    with one_thread():
        t_add = best_time(lambda: torch.tanh((Q @ W_q)[:, None, :] + (K @ W_k)[None, :, :]) @ w)
        t_dot = best_time(lambda: Q @ K.T / 8)
    assert t_add > 5 * t_dot                                                 # "much faster"


# --- notebook 03, section 5: the fully masked row ---------------------------------------
def test_fully_masked_row_is_nan_with_minus_inf_and_zero_in_the_library():
    q, k, v = torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    naive = (q @ k.T / 2).masked_fill(~mask, float("-inf")).softmax(-1)
    assert naive[1].isnan().all() and not naive[0].isnan().any()
    out, w = attention(q, k, v, mask)
    assert (w[1] == 0).all() and (out[1] == 0).all()
    torch.testing.assert_close(w[0].sum(), torch.tensor(1.0))


# --- notebook 03, section 7: why several heads ------------------------------------------
def test_two_heads_read_two_positions_one_head_returns_their_average():
    T, beta = 8, 100.0
    x = torch.arange(1.0, T + 1)[:, None] ** 2 / 10                         # (T, 1)
    keys = torch.eye(T)

    def back(s):
        return beta * torch.eye(T).roll(-s, dims=1)
    out_two, _ = attention(torch.stack((back(1), back(2))), keys.expand(2, T, T),
                           x.expand(2, T, 1))
    out_two = out_two.transpose(0, 1).reshape(T, 2)
    torch.testing.assert_close(out_two[2:], torch.cat((x[1:-1], x[:-2]), dim=1))
    one = lambda values: attention((back(1) + back(2))[None], keys[None], values[None])[0]
    torch.testing.assert_close(one(x)[0, 2:], (x[1:-1] + x[:-2]) / 2)
    swapped = x.clone()
    swapped[[3, 4]] = x[[4, 3]]                                              # swap x3 and x4
    assert torch.allclose(one(swapped)[0, 5], one(x)[0, 5])                  # same average
    assert abs(out_two[4, 0] - 1.6) < 1e-5 and abs(out_two[4, 1] - 0.9) < 1e-5  # the (1.6, 0.9)


def test_table3_rows_a_single_head_is_point_nine_bleu_below_the_best():
    bleu = {1: 24.9, 4: 25.5, 8: 25.8, 16: 25.8, 32: 25.4}
    assert round(max(bleu.values()) - bleu[1], 1) == 0.9
    assert bleu[32] < max(bleu.values())                                     # too many heads


# --- notebook 03, section 9: Table 1, measured ------------------------------------------
def attention_scores(Q, K):
    return (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).softmax(dim=-1)


def recurrent_layer(X, W, U):
    h, outputs = torch.zeros(1, X.shape[1]), []
    for x_t in X:
        h = torch.tanh(h @ W + x_t[None] @ U)
        outputs.append(h)
    return torch.cat(outputs)


def flops(fn, *args):
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return counter.get_total_flops()


def slope(ns, costs):
    return np.polyfit(np.log(ns), np.log(costs), 1)[0]


def test_counted_flops_and_memory_have_exponents_two_and_one():
    d, ns = 64, [128, 256, 512]
    W, U = torch.randn(d, d), torch.randn(d, d)
    att = [flops(attention_scores, torch.randn(n, d), torch.randn(n, d)) for n in ns]
    rnn = [flops(recurrent_layer, torch.randn(n, d), W, U) for n in ns]
    assert att == [2 * n * n * d for n in ns] and rnn == [4 * n * d * d for n in ns]
    assert att[0] == rnn[0]                                                  # cross at n = 2d
    assert round(slope(ns, att), 2) == 2.00 and round(slope(ns, rnn), 2) == 1.00
    assert attention_scores(torch.randn(2048, d), torch.randn(2048, d)).nbytes == 16 * 2**20
    assert 50 * 512 ** 2 / (50 ** 2 * 512) > 10                              # n = 50, d = 512


def test_measured_time_exponents_near_two_and_one():
    d, ns = 64, [128, 256, 512, 1024, 2048]
    W, U = torch.randn(d, d) / 8, torch.randn(d, d) / 8
    att, rnn = [], []
    with one_thread():
        for n in ns:
            Q, K, X = torch.randn(n, d), torch.randn(n, d), torch.randn(n, d)
            att.append(best_time(lambda: attention_scores(Q, K), 5))
            rnn.append(best_time(lambda: recurrent_layer(X, W, U), 3))
    a, r = slope(ns, att), slope(ns, rnn)
    assert 1.5 < a < 3.0 and 0.6 < r < 1.7 and a > r + 0.4


# --- notebook 04 ----------------------------------------------------------------------
def test_ffn_is_two_point_one_million_and_two_thirds_of_an_encoder_layer():
    assert ffn_params(512, 2048) == 2_099_712
    with torch.device("meta"):
        from transformer_lib import Transformer
        counts = count_parameters(Transformer(TransformerConfig.base()))
    enc = {k: v for k, v in counts.items() if k.startswith("encoder")}
    total = sum(enc.values())
    assert abs(enc["encoder feed-forward"] / total - 2 / 3) < 0.005
    assert abs(enc["encoder self-attention"] / total - 1 / 3) < 0.005
    assert round(100 * enc["encoder layer norms"] / total, 1) == 0.1
    assert total == 6 * 3_152_384


def tiny_stack(norm_first, N=12, seed=0):
    torch.manual_seed(seed)
    return Encoder(TransformerConfig.tiny(N=N, d_model=32, d_ff=64, h=4, P_drop=0.0,
                                          norm_first=norm_first))


def test_post_norm_stream_stays_at_one_pre_norm_stream_grows():
    stream = torch.randn(16, 10, 32)
    for norm_first in (False, True):
        h, stds = stream, []
        for layer in tiny_stack(norm_first).layers:
            h, _ = layer(h)
            stds.append(h.std().item())
        if norm_first:
            assert all(b > a for a, b in zip(stds, stds[1:-1])) and stds[-1] > 1.3
        else:
            assert all(abs(s - 1) < 0.01 for s in stds)


def test_gradient_norms_post_norm_level_then_last_layer_almost_three_times():
    def norms(norm_first, seed):
        encoder = tiny_stack(norm_first, seed=seed)
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(16, 10, 32, generator=g)
        out, _ = encoder(x)
        F.mse_loss(out, torch.randn(out.shape, generator=g)).backward()
        return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
                for layer in encoder.layers]
    post = torch.tensor([norms(False, s) for s in range(3)]).mean(0)
    pre = torch.tensor([norms(True, s) for s in range(3)]).mean(0)
    assert 2.3 < post[-1] / post[0] < 3.2                                   # "almost three times"
    assert post[:-1].max() / post[:-1].min() < 1.3                          # "level"
    assert pre[-1] / pre[0] < 1 and post[-1] / pre[-1] > 3                  # falls; nothing stands out


def test_table3_rows_c_differences_match_the_library_within_a_million():
    base = TransformerConfig.base()
    ours = sum(formula_counts(base).values())
    for change, paper in ((dict(N=2), 36), (dict(N=4), 50), (dict(N=8), 80),
                          (dict(d_ff=1024), 53), (dict(d_ff=4096), 90)):
        delta = sum(formula_counts(base.replace(**change)).values()) - ours
        assert abs(delta / 1e6 - (paper - 65)) < 1.0
    assert round(ours / 1e6, 1) == 63.1
    no_dropout, base_bleu, four_layers = 24.6, 25.8, 25.3
    assert round(base_bleu - no_dropout, 1) == 1.2 and round(base_bleu - four_layers, 1) == 0.5


# --- both notebooks: structure --------------------------------------------------------
NAMES = ["03_attention.ipynb", "04_encoder.ipynb"]


def test_fixed_slips_stay_fixed():
    nb03 = "".join(source(c) for c in cells("03_attention.ipynb"))
    solution = next(source(c) for c in cells("03_attention.ipynb")
                    if "solution" in c["metadata"].get("tags", []) and "my_attention" in source(c))
    assert 'float("-inf")' not in solution and "torch.finfo" in solution
    assert "Table 1" in nb03 and "O(n^2 \\cdot d)" in nb03
    nb04 = "".join(source(c) for c in cells("04_encoder.ipynb"))
    assert "notebook 02)" not in nb04 and "True = may attend, notebook 03" in nb04
    for text in (nb03, nb04):
        for aside in ("compiled", "nbval", "of_relu", "cpu_kernels"):
            assert aside not in text


def test_only_timing_cells_ignore_their_output():
    for name in NAMES:
        for cell in cells(name):
            if "nbval-ignore-output" in cell["metadata"].get("tags", []):
                assert "best_time(" in source(cell), source(cell)[:80]
