"""The numbers that the prose of notebooks 03, 04 and 05 states, computed from the library, and
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

from notebook_cells import cells, output_text, source

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
    w = scores.softmax(-1)  # (N, T)
    jac = torch.diag_embed(w) - w[..., :, None] * w[..., None, :]  # (N, T, T)
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
        stats[d] = dict(
            max_raw=raw.softmax(-1).amax(-1).mean().item(),
            grad_raw=softmax_grad_norm(raw),
            grad_scaled=softmax_grad_norm(raw / math.sqrt(d)),
            grad_add=softmax_grad_norm(additive),
        )
    assert abs(stats[4]["max_raw"] - 0.50) < 0.03 and abs(stats[1024]["max_raw"] - 0.96) < 0.02
    assert 4.5 < stats[4]["grad_raw"] / stats[1024]["grad_raw"] < 8  # "about sixfold"
    for key in ("grad_scaled", "grad_add"):  # "stay level"
        assert 0.8 < stats[4][key] / stats[1024][key] < 1.25


def test_additive_hidden_layer_is_d_a_times_the_score_table_and_slower():
    T, d_k, d_a = 256, 64, 64
    Q, K = torch.randn(T, d_k), torch.randn(T, d_k)
    W_q, W_k, w = torch.randn(d_k, d_a), torch.randn(d_k, d_a), torch.randn(d_a)
    hidden = torch.tanh((Q @ W_q)[:, None, :] + (K @ W_k)[None, :, :])  # (T, T, d_a)
    scores = Q @ K.T
    assert hidden.nbytes == 16 * 2**20 and scores.nbytes == 2**18  # 16 and 0.25 MiB
    assert hidden.nbytes // scores.nbytes == d_a == 64

    with one_thread():
        t_add = best_time(lambda: torch.tanh((Q @ W_q)[:, None, :] + (K @ W_k)[None, :, :]) @ w)
        t_dot = best_time(lambda: Q @ K.T / 8)
    assert t_add > 5 * t_dot  # "much faster"


def test_additive_scores_saturate_their_tanh_without_the_scaled_weights():
    torch.manual_seed(0)
    stats = {}
    for d in (64, 1024):
        q, k = torch.randn(500, 16, d), torch.randn(500, 16, d)
        for scaled in (True, False):
            scale = 1 / math.sqrt(d) if scaled else 1.0
            hidden = torch.tanh(q @ (torch.randn(d, 64) * scale) + k @ (torch.randn(d, 64) * scale))
            stats[d, scaled] = (
                (hidden.abs() > 0.99).float().mean().item(),
                (1 - hidden**2).mean().item(),
            )
    assert all(abs(stats[d, True][0] - 0.06) < 0.005 for d in (64, 1024))  # 6% at both widths
    assert (
        round(100 * stats[64, False][0], 1) == 81.5
        and round(100 * stats[1024, False][0], 1) == 95.3
    )
    assert round(stats[1024, True][1], 2) == 0.48 and round(stats[1024, False][1], 2) == 0.02


# --- notebook 03, section 5: the fully masked row ---------------------------------------
def test_fully_masked_row_is_nan_with_minus_inf_and_zero_in_the_library():
    q, k, v = torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    naive = (q @ k.T / 2).masked_fill(~mask, float("-inf")).softmax(-1)
    assert naive[1].isnan().all() and not naive[0].isnan().any()
    out, w = attention(q, k, v, mask)
    assert (w[1] == 0).all() and (out[1] == 0).all()
    torch.testing.assert_close(w[0].sum(), torch.tensor(1.0))


# --- notebook 04, section 2: why several heads ------------------------------------------
def test_two_heads_read_two_positions_one_head_returns_their_average():
    T, beta = 8, 100.0
    x = torch.arange(1.0, T + 1)[:, None] ** 2 / 10  # (T, 1)
    keys = torch.eye(T)

    def back(s):
        return beta * torch.eye(T).roll(-s, dims=1)

    out_two, _ = attention(torch.stack((back(1), back(2))), keys.expand(2, T, T), x.expand(2, T, 1))
    out_two = out_two.transpose(0, 1).reshape(T, 2)
    torch.testing.assert_close(out_two[2:], torch.cat((x[1:-1], x[:-2]), dim=1))
    one = lambda values: attention((back(1) + back(2))[None], keys[None], values[None])[0]
    torch.testing.assert_close(one(x)[0, 2:], (x[1:-1] + x[:-2]) / 2)
    swapped = x.clone()
    swapped[[3, 4]] = x[[4, 3]]  # swap x3 and x4
    assert torch.allclose(one(swapped)[0, 5], one(x)[0, 5])  # same average
    assert abs(out_two[4, 0] - 1.6) < 1e-5 and abs(out_two[4, 1] - 0.9) < 1e-5  # the (1.6, 0.9)


def test_table3_rows_a_single_head_is_point_nine_bleu_below_the_best():
    bleu = {1: 24.9, 4: 25.5, 8: 25.8, 16: 25.8, 32: 25.4}
    assert round(max(bleu.values()) - bleu[1], 1) == 0.9
    assert bleu[32] < max(bleu.values())  # too many heads


# --- notebook 04, section 4: Table 1, measured ------------------------------------------
def self_attention(Q, K, V):
    weights = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).softmax(dim=-1)
    return weights @ V, weights


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


def test_counted_flops_cover_both_products_and_cross_at_n_equal_d():
    d, ns = 64, [64, 128, 256, 512]
    W, U = torch.randn(d, d), torch.randn(d, d)
    att = [flops(self_attention, *torch.randn(3, n, d)) for n in ns]
    rnn = [flops(recurrent_layer, torch.randn(n, d), W, U) for n in ns]
    assert att == [4 * n * n * d for n in ns] and rnn == [4 * n * d * d for n in ns]
    assert att[0] == rnn[0] and ns[0] == d  # equal at n = d
    assert all(a > r for a, r in zip(att[1:], rnn[1:]))  # "cheaper while n < d"
    assert round(slope(ns, att), 2) == 2.00 and round(slope(ns, rnn), 2) == 1.00
    assert self_attention(*torch.randn(3, 2048, d))[1].nbytes == 16 * 2**20  # 16 MiB
    assert 50 * 512**2 / (50**2 * 512) > 10  # n = 50, d = 512


def test_stored_flop_table_starts_equal_at_n_equal_d():
    cell = next(
        c for c in cells("04_multi_head_attention.ipynb") if "def self_attention" in source(c)
    )
    first_row = output_text(cell).splitlines()[1].split()
    assert first_row == ["64", "1,048,576", "1,048,576", "0.02"]
    assert "exponents: attention FLOPs 2.00, recurrent FLOPs 1.00" in output_text(cell)


def test_measured_time_slopes_and_the_recurrent_layer_slower_beyond_n_equal_d():
    d, ns = 64, [64, 128, 256, 512, 1024, 2048]
    W, U = torch.randn(d, d) / 8, torch.randn(d, d) / 8
    att, rnn = [], []
    with one_thread():
        for n in ns:
            Q, K, V, X = torch.randn(4, n, d)
            att.append(best_time(lambda: self_attention(Q, K, V), 5))
            rnn.append(best_time(lambda: recurrent_layer(X, W, U), 3))
    a, r = slope(ns, att), slope(ns, rnn)
    assert 1.5 < a < 3.2 and 0.6 < r < 1.9 and a > r + 0.3
    assert all(rt > 3 * at for at, rt in zip(att[:3], rnn[:3]))  # n = d .. 4d


# --- notebook 05 ----------------------------------------------------------------------
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
    return Encoder(
        TransformerConfig.tiny(N=N, d_model=32, d_ff=64, h=4, P_drop=0.0, norm_first=norm_first)
    )


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
        return [
            torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
            for layer in encoder.layers
        ]

    post = torch.tensor([norms(False, s) for s in range(3)]).mean(0)
    pre = torch.tensor([norms(True, s) for s in range(3)]).mean(0)
    assert 2.3 < post[-1] / post[0] < 3.2  # "almost three times"
    assert post[:-1].max() / post[:-1].min() < 1.3  # "level"
    assert pre[-1] / pre[0] < 1 and post[-1] / pre[-1] > 3  # falls; nothing stands out


def at_initialisation(init, seed):
    encoder = tiny_stack(False, seed=seed)
    for p in encoder.parameters():
        if init is not None and p.dim() > 1:
            init(p)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 10, 32, generator=g)
    attended, w = encoder.layers[0].self_attn(x, need_weights=True)
    out, _ = encoder(x)
    F.mse_loss(out, torch.randn(out.shape, generator=g)).backward()
    grads = [
        torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
        for layer in encoder.layers
    ]
    return grads, (attended.std() / x.std()).item(), w.amax(-1).mean().item()


def test_initialisation_scaled_starts_are_level_unit_variance_spreads_a_thousandfold():
    results = {}
    for name, init in (
        ("default", None),
        ("xavier", torch.nn.init.xavier_uniform_),
        ("normal", torch.nn.init.normal_),
    ):
        runs = [at_initialisation(init, seed) for seed in range(3)]
        results[name] = [torch.tensor([r[k] for r in runs]).mean(0) for k in range(3)]
    for name in ("default", "xavier"):  # "within a factor of about three"
        grads = results[name][0]
        assert 2.5 < grads.max() / grads.min() < 3.5
        assert grads[-1] == grads.max()  # the last layer stands out
    grads, ratio, top = results["normal"]
    assert grads.max() / grads.min() > 1000  # "more than three orders of magnitude"
    assert round(grads[0].item(), -1) == 350 and round(grads.min().item(), 3) == 0.075
    assert round(ratio.item(), -1) == 30 and round(top.item(), 2) == 0.96
    assert (
        round(results["xavier"][1].item(), 2) == 0.25
        and round(results["default"][1].item(), 2) == 0.15
    )


def test_with_unit_variance_every_sub_layer_output_dwarfs_its_input():
    encoder = tiny_stack(False)
    for p in encoder.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p)
    h = torch.randn(16, 10, 32)
    for layer in encoder.layers[:3]:
        attended = layer.self_attn(h)[0]
        y = layer.attn_block.norm(h + attended)
        assert attended.std() / h.std() > 25 and layer.feed_forward(y).std() / y.std() > 25
        h = layer(h)[0]


def test_transformer_init_draws_every_encoder_and_decoder_matrix_from_xavier():
    from transformer_lib import Transformer

    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(N=1, d_model=64, d_ff=256, h=4))
    w = model.encoder.layers[0].feed_forward.w_1.weight  # (256, 64)
    bound = math.sqrt(6 / (64 + 256))
    assert w.abs().max() <= bound and w.abs().max() > 0.95 * bound  # U(-a, a)
    assert abs(w.var().item() / (2 / (64 + 256)) - 1) < 0.1  # 2 / (n_in + n_out)
    assert abs(1 / (3 * 64) / (2 / (64 + 64)) - 1 / 3) < 1e-12  # default: a third


def test_table3_rows_c_d_model_totals_and_what_width_buys():
    base = TransformerConfig.base()
    ours = {D: sum(formula_counts(base.replace(d_model=D)).values()) / 1e6 for D in (256, 1024)}
    assert round(ours[256], 1) == 26.8 and round(ours[1024], 1) == 163.9
    assert base.replace(d_model=256).d_k == 32 and base.replace(d_model=1024).d_k == 128
    paper = {256: (28, 5.75, 24.5), 1024: (168, 4.66, 26.0), "d_ff=4096": (90, 4.75, 26.2)}
    for D in (256, 1024):
        assert abs(ours[D] / paper[D][0] - 1) < 0.05  # a few percent below
        assert ours[D] < paper[D][0]
    assert round(168 / 65, 1) == 2.6 and round(26.0 - 25.8, 1) == 0.2
    assert paper["d_ff=4096"][2] > paper[1024][2] and paper["d_ff=4096"][0] < paper[1024][0]
    assert round(25.8 - 24.5, 1) == 1.3


def test_table3_rows_c_differences_match_the_library_within_a_million():
    base = TransformerConfig.base()
    ours = sum(formula_counts(base).values())
    for change, paper in (
        (dict(N=2), 36),
        (dict(N=4), 50),
        (dict(N=8), 80),
        (dict(d_ff=1024), 53),
        (dict(d_ff=4096), 90),
    ):
        delta = sum(formula_counts(base.replace(**change)).values()) - ours
        assert abs(delta / 1e6 - (paper - 65)) < 1.0
    assert round(ours / 1e6, 1) == 63.1
    no_dropout, base_bleu, four_layers = 24.6, 25.8, 25.3
    assert round(base_bleu - no_dropout, 1) == 1.2 and round(base_bleu - four_layers, 1) == 0.5


# --- the three notebooks: structure --------------------------------------------------------
NAMES = ["03_attention.ipynb", "04_multi_head_attention.ipynb", "05_encoder.ipynb"]


def test_fixed_slips_stay_fixed():
    nb03 = "".join(source(c) for c in cells("03_attention.ipynb"))
    nb04 = "".join(source(c) for c in cells("04_multi_head_attention.ipynb"))
    solution = next(
        source(c)
        for c in cells("03_attention.ipynb")
        if "solution" in c["metadata"].get("tags", []) and "my_attention" in source(c)
    )
    assert 'float("-inf")' not in solution and "torch.finfo" in solution
    assert "Table 1" in nb04 and "O(n^2 \\cdot d)" in nb04
    assert "We suspect" in nb03 and "Footnote 4 gives the reason" not in nb03
    assert "Additive scores do not have this problem" not in nb03
    assert "$n = 2d" not in nb04 and "$n = d = 64$" in nb04 and "4n^2d" in nb04
    assert "near 2 and near 1, pulled up" not in nb04
    shown = [source(c) for name in NAMES for c in cells(name)]
    for constructor in (
        "inspect.getsource(MultiHeadAttention.__init__)",
        "inspect.getsource(EncoderLayer)",
        "inspect.getsource(Transformer.__init__)",
    ):
        assert any(constructor in text for text in shown), constructor
    nb05 = "".join(source(c) for c in cells("05_encoder.ipynb"))
    assert "notebook 02)" not in nb05 and "True = may attend, notebook 03" in nb05
    for text in (nb03, nb04, nb05):
        for aside in ("compiled", "nbval", "of_relu", "cpu_kernels"):
            assert aside not in text


def test_only_timing_cells_ignore_their_output():
    for name in NAMES:
        for cell in cells(name):
            if "nbval-ignore-output" in cell["metadata"].get("tags", []):
                assert "best_time(" in source(cell), source(cell)[:80]
