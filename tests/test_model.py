import pytest
import torch

from transformer_lib import Transformer, TransformerConfig


@pytest.fixture
def model(tiny):
    return Transformer(tiny).eval()


def batch(c, B=3, S=7, T=6):
    src = torch.randint(1, c.src_vocab_size, (B, S))
    tgt = torch.randint(1, c.tgt_vocab_size, (B, T))
    return src, tgt


def test_forward_shape_and_weights(model, tiny):
    src, tgt = batch(tiny)
    logits = model(src, tgt)
    assert logits.shape == (3, 6, tiny.tgt_vocab_size)
    logits2, w = model(src, tgt, need_weights=True)
    torch.testing.assert_close(logits2, logits, atol=1e-5, rtol=1e-4)  # explicit == fused
    assert [x.shape for x in w["encoder"]] == [(3, tiny.h, 7, 7)] * tiny.N
    assert [x.shape for x in w["decoder_self"]] == [(3, tiny.h, 6, 6)] * tiny.N
    assert [x.shape for x in w["decoder_cross"]] == [(3, tiny.h, 6, 7)] * tiny.N


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_a_future_target_token_leaves_earlier_logits_unchanged(tiny, norm_first):
    model = Transformer(tiny.replace(norm_first=norm_first)).eval()
    src, tgt = batch(tiny)
    before = model(src, tgt)
    for t in range(1, tgt.shape[1]):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(1, tiny.tgt_vocab_size, changed[:, t:].shape)
        after = model(src, changed)
        torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-5, rtol=1e-4)
        assert not torch.allclose(after[:, t:], before[:, t:])


def test_padding_the_source_changes_nothing(model, tiny):
    src, tgt = batch(tiny, S=5)
    padded = torch.cat([src, torch.full((3, 4), tiny.pad_id)], dim=1)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-5, rtol=1e-4)


def test_padded_target_positions_change_nothing_before_them(model, tiny):
    src, tgt = batch(tiny, T=4)
    longer = torch.cat([tgt, torch.full((3, 3), tiny.pad_id)], dim=1)
    torch.testing.assert_close(model(src, longer)[:, :4], model(src, tgt), atol=1e-5, rtol=1e-4)


def test_batch_equals_items_one_by_one(model, tiny):
    lengths = [(7, 6), (3, 2), (5, 4)]
    src = torch.full((3, 7), tiny.pad_id)
    tgt = torch.full((3, 6), tiny.pad_id)
    for i, (s, t) in enumerate(lengths):
        src[i, :s] = torch.randint(1, tiny.src_vocab_size, (s,))
        tgt[i, :t] = torch.randint(1, tiny.tgt_vocab_size, (t,))
    together = model(src, tgt)
    for i, (s, t) in enumerate(lengths):
        alone = model(src[i : i + 1, :s], tgt[i : i + 1, :t])
        torch.testing.assert_close(together[i : i + 1, :t], alone, atol=1e-5, rtol=1e-4)


def test_incremental_decoding_with_cache_equals_full_decoding(model, tiny):
    src, tgt = batch(tiny)
    src[0, 5:] = tiny.pad_id
    memory = model.encode(src)
    full = model.decode(tgt, memory, src=src)
    cache = model.new_cache()
    steps = [
        model.decode(tgt[:, t : t + 1], memory, src=src, cache=cache) for t in range(tgt.shape[1])
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)
    assert cache.length == tgt.shape[1]


def test_a_tiny_model_overfits_one_batch(tiny):
    torch.manual_seed(0)
    model = Transformer(tiny.replace(P_drop=0.0))
    src, tgt = batch(tiny, B=4, S=6, T=6)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = torch.nn.functional.cross_entropy(
            model(src, tgt_in).flatten(0, 1), tgt_out.flatten()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    assert loss.item() < 0.05
    assert torch.equal(model(src, tgt_in).argmax(-1), tgt_out)


def test_weight_tying_shares_one_matrix(tiny):
    tied = Transformer(tiny)
    assert tied.generator.weight is tied.src_embed.weight is tied.tgt_embed.weight
    untied = Transformer(tiny.replace(tie_embeddings=False))
    assert untied.generator.weight is not untied.tgt_embed.weight
    assert untied.src_embed is not untied.tgt_embed
    n = tiny.src_vocab_size * tiny.d_model
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(untied) - count(tied) == 2 * n


def closed_form_parameters(c: TransformerConfig) -> int:
    D, F, V, N = c.d_model, c.d_ff, c.src_vocab_size, c.N
    mha = 4 * D * D + 4 * D
    ffn = 2 * D * F + F + D
    norm = 2 * D
    encoder = N * (mha + ffn + 2 * norm)
    decoder = N * (2 * mha + ffn + 3 * norm)
    return V * D + encoder + decoder  # one shared (V, D) matrix, no output bias


@pytest.mark.parametrize("preset, paper_millions", [("base", 65), ("big", 213)])
def test_parameter_counts_next_to_table_3(preset, paper_millions):
    config = getattr(TransformerConfig, preset)(37000)
    model = Transformer(config)
    ours = sum(p.numel() for p in model.parameters())
    assert ours == closed_form_parameters(config)
    print(f"{preset}: {ours / 1e6:.1f}M parameters (Table 3: {paper_millions}M)")
    assert abs(ours / 1e6 - paper_millions) / paper_millions < 0.05


def test_positional_table_is_a_buffer_that_moves_with_the_model(model):
    assert "positions.pe" in model.state_dict()
    assert model.to(torch.float64).positions.pe.dtype == torch.float64


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda s, t: (s.float(), t), TypeError, "src must hold integer"),
        (lambda s, t: (s, t.float()), TypeError, "tgt must hold integer"),
        (lambda s, t: (s + 1000, t), ValueError, "src holds ids outside"),
        (lambda s, t: (s, t - 100), ValueError, "tgt holds ids outside"),
        (lambda s, t: (s[0], t), ValueError, "src must have shape"),
        (lambda s, t: (s.tolist(), t), TypeError, "src must be a torch.Tensor"),
        (lambda s, t: (torch.ones(1, 200, dtype=torch.long), t[:1]), ValueError, "max_len"),
    ],
)
def test_bad_calls_name_the_argument(model, tiny, make, error, match):
    src, tgt = make(*batch(tiny))
    with pytest.raises(error, match=match):
        model(src, tgt)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        (dict(src_mask=torch.ones(3, 1, 1, 7)), TypeError, "src_mask must have dtype"),
        (dict(src_mask=torch.ones(3, 1, 1, 8, dtype=torch.bool)), ValueError, "src_mask"),
        (dict(tgt_mask=torch.ones(3, 1, 6, 5, dtype=torch.bool)), ValueError, "tgt_mask"),
        (dict(tgt_mask=torch.ones(6, 6, dtype=torch.int64)), TypeError, "tgt_mask must have dtype"),
    ],
)
def test_bad_masks_name_the_argument(model, tiny, kw, error, match):
    with pytest.raises(error, match=match):
        model(*batch(tiny), **kw)


def test_config_must_be_a_config():
    with pytest.raises(TypeError, match="TransformerConfig"):
        Transformer({"d_model": 512})


def test_training_step_under_bf16_autocast_reaches_every_parameter():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(30, N=1, P_drop=0.1)).train()
    src, tgt = torch.randint(1, 30, (3, 6)), torch.randint(1, 30, (3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    logits.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


# shape errors name the argument that is wrong -------------------------------------------
def test_src_and_tgt_batches_that_differ_are_named(tiny):
    model = Transformer(tiny)
    src, tgt = torch.randint(3, 50, (2, 5)), torch.randint(3, 50, (3, 4))
    with pytest.raises(ValueError, match=r"tgt holds a batch of 3 .* holds 2") as info:
        model(src, tgt)
    assert "src_mask" not in str(info.value)


def test_a_cache_reused_with_another_batch_size_is_named(tiny):
    model = Transformer(tiny).eval()
    memory = model.encode(torch.randint(3, 50, (2, 5)))
    cache = model.new_cache()
    model.decode(torch.ones(2, 1, dtype=torch.long), memory, cache=cache)
    other = model.encode(torch.randint(3, 50, (3, 5)))
    with pytest.raises(ValueError, match=r"cache holds keys and values of a batch of 2.*new_cache"):
        model.decode(torch.ones(3, 1, dtype=torch.long), other, cache=cache)
    assert cache.batch_size == 2 and model.new_cache().batch_size is None


def test_memory_of_the_wrong_rank_is_named(tiny):
    model = Transformer(tiny)
    with pytest.raises(ValueError, match=r"memory must have shape \(B, S, D\)"):
        model.decode(torch.ones(2, 1, dtype=torch.long), torch.zeros(2, 5))


def test_a_teacher_forced_pass_reads_each_inputs_values_once(tiny, monkeypatch):
    """src and tgt are range-checked once each (one aminmax), and the source mask is checked
    once, however many layers and modules they pass through."""
    import transformer_lib.checks as checks

    model = Transformer(tiny)
    reads, mask_checks = [], []
    aminmax, check_mask = torch.aminmax, checks.check_mask
    monkeypatch.setattr(torch, "aminmax", lambda t: reads.append(t) or aminmax(t))
    monkeypatch.setattr(
        "transformer_lib.model.check_mask",
        lambda m, name, *a, **k: mask_checks.append(name) or check_mask(m, name, *a, **k),
    )
    src, tgt = batch(tiny)
    model(src, tgt, src_mask=src[:, None, None, :] != 0)
    assert [r.shape for r in reads] == [src.shape, tgt.shape]
    assert mask_checks.count("src_mask") == 1
