"""The whole Transformer: shapes, causality, padding, batch = items, cached decoding, weight
tying, parameter counts against their formulas (Table 3), the config's variants (pre-norm,
learned positions, d_k != d_model / h), and a tiny model that overfits a batch."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib.config import TransformerConfig
from transformer_lib.model import Transformer
from transformer_lib.params import count_parameters, formula_counts
from transformer_lib.training import LabelSmoothingLoss, adam


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def batch(c, B=3, S=7, T=6):
    return torch.randint(3, c.src_vocab_size, (B, S)), torch.randint(3, c.tgt_vocab_size, (B, T))


VARIANTS = {
    "post-norm": {},
    "pre-norm": dict(norm_first=True),
    "learned positions": dict(positions="learned"),
    "d_k=12": dict(d_k=12),
    "untied": dict(tie_embeddings=False),
}


@pytest.fixture(params=list(VARIANTS))
def variant(request, tiny):
    return tiny.replace(**VARIANTS[request.param])


def test_forward_shapes_and_weights_and_explicit_equals_fused(variant):
    model = Transformer(variant).eval()
    src, tgt = batch(variant)
    logits = model(src, tgt)
    assert logits.shape == (3, 6, variant.tgt_vocab_size)
    again, w = model(src, tgt, need_weights=True)
    close(again, logits)
    h, N = variant.h, variant.N
    assert [x.shape for x in w["encoder"]] == [(3, h, 7, 7)] * N
    assert [x.shape for x in w["decoder_self"]] == [(3, h, 6, 6)] * N
    assert [x.shape for x in w["decoder_cross"]] == [(3, h, 6, 7)] * N


def test_changing_a_future_target_token_leaves_earlier_logits_unchanged(variant):
    model = Transformer(variant).eval()
    src, tgt = batch(variant)
    before = model(src, tgt)
    for t in range(1, tgt.shape[1]):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(3, variant.tgt_vocab_size, changed[:, t:].shape)
        after = model(src, changed)
        close(after[:, :t], before[:, :t])
        assert not torch.allclose(after[:, t:], before[:, t:])


def test_padding_the_source_or_the_target_changes_nothing(variant):
    model = Transformer(variant).eval()
    src, tgt = batch(variant, S=5, T=4)
    pad = torch.full((3, 3), variant.pad_id)
    close(model(torch.cat([src, pad], 1), tgt), model(src, tgt))
    close(model(src, torch.cat([tgt, pad], 1))[:, :4], model(src, tgt))


def test_a_batch_equals_its_rows_one_by_one(tiny):
    model = Transformer(tiny).eval()
    lengths = [(7, 6), (3, 2), (5, 4)]
    src = torch.full((3, 7), tiny.pad_id)
    tgt = torch.full((3, 6), tiny.pad_id)
    for i, (s, t) in enumerate(lengths):
        src[i, :s] = torch.randint(3, tiny.src_vocab_size, (s,))
        tgt[i, :t] = torch.randint(3, tiny.tgt_vocab_size, (t,))
    together = model(src, tgt)
    for i, (s, t) in enumerate(lengths):
        close(together[i : i + 1, :t], model(src[i : i + 1, :s], tgt[i : i + 1, :t]))


def test_cached_decoding_equals_the_full_decoder_pass(variant):
    model = Transformer(variant).eval()
    src, tgt = batch(variant)
    src[0, 5:] = variant.pad_id
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)
    full = model.decode(tgt, memory, src_mask)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache) for t in range(6)]
    close(torch.cat(steps, dim=1), full)
    assert cache.length == 6 and cache.batch_size == 3 and cache.nbytes() > 0


def test_tied_embeddings_are_one_matrix(tiny):
    tied, untied = Transformer(tiny), Transformer(tiny.replace(tie_embeddings=False))
    assert tied.generator.weight is tied.src_embed.weight is tied.tgt_embed.weight
    assert untied.generator.weight is not untied.tgt_embed.weight
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(tied) == 2 * tiny.src_vocab_size * tiny.d_model


def test_parameter_counts_equal_the_formulas(variant):
    model = Transformer(variant)
    counts = count_parameters(model)
    assert counts == formula_counts(variant)
    assert sum(counts.values()) == sum(p.numel() for p in model.parameters())
    if variant.positions == "learned":
        assert counts["learned positions"] == variant.max_len * variant.d_model


@pytest.mark.parametrize("preset, millions", [("base", 65), ("big", 213)])
def test_the_presets_have_table_3_s_sizes(preset, millions):
    config = getattr(TransformerConfig, preset)(37000)
    total = sum(formula_counts(config).values())
    assert abs(total / 1e6 - millions) / millions < 0.05  # formulas == model: the test above


def test_a_training_step_reaches_every_parameter(variant):
    model = Transformer(variant.replace(P_drop=0.1)).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    src, tgt = batch(variant)
    opt = adam(model)
    loss = LabelSmoothingLoss(0.1)(model(src, tgt[:, :-1]), tgt[:, 1:])
    loss.backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())
    opt.param_groups[0]["lr"] = 1e-3
    opt.step()
    assert all(not torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_a_step_under_bf16_autocast_keeps_float32_weights(tiny):
    model = Transformer(tiny.replace(P_drop=0.1)).train()
    src, tgt = batch(tiny)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
    assert logits.dtype == torch.bfloat16
    logits.float().logsumexp(-1).mean().backward()
    assert all(p.dtype == torch.float32 and p.grad.isfinite().all() for p in model.parameters())


def test_a_tiny_model_overfits_one_batch(tiny):
    model = Transformer(tiny.replace(P_drop=0.0))
    src, tgt = batch(tiny, B=4, S=6, T=6)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(100):
        loss = F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert torch.equal(model.eval()(src, tgt_in).argmax(-1), tgt_out)


def test_the_position_table_moves_with_the_model(tiny):
    model = Transformer(tiny)
    assert "positions.pe" in model.state_dict()
    assert model.to(torch.float64).positions.pe.dtype == torch.float64
    src, tgt = batch(tiny)
    assert model.eval()(src, tgt).dtype == torch.float64
