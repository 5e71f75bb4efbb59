"""The series on a CUDA GPU: both attention paths in fp32 and bf16, cached decoding, a
training checkpoint moved between GPU and CPU, torch.compile without recompiles, bf16
autocast training steps, and the date task trained to 99 % (``-m gpu_training``: a minute or
two). Every test skips where there is no GPU (``benchmarks/gpu_check.py`` runs them)."""

import time

import pytest
import torch

from transformer_lib.attention import MultiHeadAttention, attention, fused_attention
from transformer_lib.checkpoint import load_checkpoint
from transformer_lib.config import TransformerConfig
from transformer_lib.masks import causal_mask, padding_mask
from transformer_lib.model import Transformer
from transformer_lib.search import beam_search, greedy_decode, translate
from transformer_lib.tokenizers import CharTokenizer
from transformer_lib.training import TrainConfig, Trainer, bf16_problem, exact_match, prepare

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU"),
]
CUDA = "cuda"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_both_attention_paths_agree_with_the_explicit_one_in_fp64(dtype):
    B, H, T, d_k = 3, 4, 33, 16
    q, k, v = (torch.randn(B, H, T, d_k, device=CUDA) for _ in range(3))
    ids = torch.ones(B, T, dtype=torch.long, device=CUDA)
    ids[0, 20:] = 0
    mask = padding_mask(ids, 0) & causal_mask(T, CUDA)  # (B, 1, T, T)
    mask[2, :, 5] = False  # a query that sees nothing: zeros
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    inputs = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    reference = [t.double().requires_grad_() for t in (q, k, v)]
    want = attention(*reference, mask)[0]  # fp64: the reference
    want_grads = torch.autograd.grad(want.square().sum(), reference)
    sees = mask.any(-1, keepdim=True).expand_as(want)  # the queries that see a key
    for name, path in (("explicit", lambda *a: attention(*a)[0]), ("fused", fused_attention)):
        got = path(*inputs, mask)
        assert got.dtype == dtype and torch.isfinite(got).all()
        torch.testing.assert_close(got.double()[sees], want.detach()[sees], atol=tol, rtol=tol)
        # documented: a query that sees no key gets a zero output (cuDNN's kernel, chosen for
        # bf16 on a Hopper GPU, was seen to give another value)
        assert torch.all(got[2, :, 5] == 0), f"{name}: a fully masked query's output is not 0"
        grads = torch.autograd.grad(got.float().square().sum(), inputs)
        for g, w in zip(grads, want_grads):
            torch.testing.assert_close(g.double(), w, atol=10 * tol, rtol=10 * tol)
    layer = MultiHeadAttention(64, 4).to(CUDA).eval()
    x = torch.randn(B, T, 64, device=CUDA)
    with torch.autocast(CUDA, torch.bfloat16, enabled=dtype == torch.bfloat16):
        explicit, _ = layer(x, mask=mask, need_weights=True)
        fused, _ = layer(x, mask=mask)
    rows = mask.any(-1)[:, 0]  # (B, T): the queries that see a key (the other: see above)
    torch.testing.assert_close(fused.float()[rows], explicit.float()[rows], atol=tol, rtol=tol)


def random_model(seed, **overrides):
    torch.manual_seed(seed)
    config = TransformerConfig.tiny(20, 12, **{"P_drop": 0.0, **overrides})
    return Transformer(config).to(CUDA)


@pytest.mark.parametrize("seed", range(3))
def test_cached_decoding_gives_the_tokens_of_uncached_decoding(seed):
    model = random_model(seed, norm_first=bool(seed % 2))
    src = torch.randint(3, 20, (6, 7), device=CUDA)
    src[1, 4:] = 0
    for eos in (2, 4):
        assert torch.equal(
            greedy_decode(model, src, 15, eos_id=eos),
            greedy_decode(model, src, 15, eos_id=eos, use_cache=False),
        )
        assert torch.equal(
            beam_search(model, src, 12, beam_size=3, eos_id=eos),
            beam_search(model, src, 12, beam_size=3, eos_id=eos, use_cache=False),
        )


PAIRS = [("one two", "1 2"), ("three", "3"), ("two one three", "2 1 3"), ("four one", "4 1")]


def make_trainer(path, device, **settings):
    torch.manual_seed(0)
    tok = CharTokenizer.train([s for s, _ in PAIRS] + [t for _, t in PAIRS])
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, P_drop=0.0, max_len=32))
    config = TrainConfig(
        task="dates",
        max_tokens=40,
        warmup=3,
        eval_limit=4,
        decode_max_len=8,
        progress=False,
        verbose=False,
        **settings,
    )
    examples = [(tok.encode(s), tok.encode(t)) for s, t in PAIRS]
    return Trainer(model, tok, examples, PAIRS, config, path, device)


def test_a_gpu_checkpoint_resumes_on_the_cpu_and_back(tmp_path):
    make_trainer(tmp_path / "gpu.pt", CUDA, steps=3).fit()
    before = load_checkpoint(tmp_path / "gpu.pt")["model"]  # read back on the CPU
    assert before["generator.weight"].device.type == "cpu"
    results = {}
    for device in (CUDA, "cpu"):
        trainer = make_trainer(tmp_path / "gpu.pt", device, steps=4)
        trainer.resume()
        trainer.checkpoint = tmp_path / f"{device}.pt"
        results[device] = trainer.fit()
        assert next(trainer.model.parameters()).device.type == device
    assert results["cpu"]["loss"][-1] == pytest.approx(results[CUDA]["loss"][-1], rel=1e-4)
    lr = results["cpu"]["lr"][-1]
    gpu, cpu = (load_checkpoint(tmp_path / f"{d}.pt")["model"] for d in (CUDA, "cpu"))
    for name in gpu:  # the same step, within a few per cent of Adam's step size (lr)
        step_gpu, step_cpu = gpu[name] - before[name], cpu[name] - before[name]
        torch.testing.assert_close(step_cpu, step_gpu, atol=0.05 * lr, rtol=0.05)
    back = make_trainer(tmp_path / "cpu.pt", CUDA, steps=5)  # and back on the GPU
    back.resume()
    assert back.fit()["step"][-1] == 5


def test_a_compiled_training_step_does_not_recompile_after_warm_up():
    from torch._dynamo.utils import counters

    model = random_model(0, P_drop=0.1).train()
    compiled = torch.compile(model, dynamic=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch._dynamo.reset()
    counters.clear()
    for i, (S, T) in enumerate([(9, 7), (13, 5), (6, 11), (9, 7)]):
        src = torch.randint(3, 20, (4, S), device=CUDA)
        tgt = torch.randint(3, 12, (4, T), device=CUDA)
        src[0, -2:] = 0
        with torch.compiler.set_stance("fail_on_recompile" if i else "default"):
            logits = compiled(src, tgt)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1


def test_bf16_autocast_training_steps_run_on_the_gpu():
    assert bf16_problem(torch.device(CUDA)) is None
    trainer = make_trainer(None, CUDA, steps=3, bf16=True)
    history = trainer.fit()
    assert all(loss == loss and loss < 10 for loss in history["loss"])
    assert all(p.dtype == torch.float32 and p.is_cuda for p in trainer.model.parameters())
    assert 0.0 <= history["val_exact_match"][-1] <= 1.0


@pytest.mark.gpu_training
def test_the_date_task_trains_to_99_percent_on_the_gpu(capsys):
    config = TrainConfig(
        task="dates",
        d_model=64,
        layers=2,
        heads=4,
        d_ff=256,
        dropout=0.0,
        max_tokens=4000,
        warmup=400,
        steps=3000,
        average_last=5,
        eval_limit=300,
        progress=False,
        verbose=False,
    )  # 100 % in 65 s on an H200 (the CPU recipe of checkpoints/dates.pt: 94.8 % there)
    start = time.perf_counter()
    run = prepare(config, device=CUDA)
    run.trainer.fit()
    seconds = time.perf_counter() - start
    hyps = translate(
        run.trainer.model,
        run.trainer.tokenizer,
        [s for s, _ in run.test_pairs],
        max_len=16,
        batch_size=500,
    )
    score = exact_match(hyps, [t for _, t in run.test_pairs])
    with capsys.disabled():
        print(
            f"\ndate task on {torch.cuda.get_device_name()}: {config.steps} steps in "
            f"{seconds:.0f} s, exact match {100 * score:.1f} % of {len(hyps)} test dates"
        )
    assert score >= 0.99
