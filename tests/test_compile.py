"""torch.compile traces a training step of the plain model (forward, loss, backward) as one
graph: no graph break and no recompilation.

Value checks (a host sync, ``Tensor.item()``) are skipped while dynamo traces, and the
residual blocks get their sub-layer module rather than a new function at every call.
"""

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from transformer_lib import Transformer, TransformerConfig

V = 30


def batch(S, T, seed):
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(1, V, (3, S), generator=g), torch.randint(1, V, (3, T), generator=g)
    src[0, -2:] = 0  # padding in the source
    tgt[1, -1:] = 0  # and in the target
    return src, tgt


def run_steps(model, shapes, dynamic, backend="aot_eager"):
    """Compile forward + loss, run one training step per (S, T), return the losses.
    ("aot_eager" traces the backward pass too; "eager" only dynamo's part, faster.)"""

    def loss_of(src, tgt):
        logits = model(src, tgt)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=0)

    torch._dynamo.reset()
    counters.clear()
    step = torch.compile(loss_of, backend=backend, dynamic=dynamic)
    losses = []
    for i, (S, T) in enumerate(shapes):
        with torch.compiler.set_stance("fail_on_recompile" if i else "default"):
            loss = step(*batch(S, T, seed=i))
        loss.backward()  # through the compiled graph's backward
        losses.append(loss.detach())
    return losses


def assert_one_graph():
    assert dict(counters["graph_break"]) == {}, list(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1
    assert counters["frames"]["total"] == 1  # one frame compiled, once


def test_a_training_step_compiles_into_one_graph():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2)).train()
    run_steps(model, [(7, 6)] * 3, dynamic=False)  # dropout on: new masks each step
    assert_one_graph()
    assert all(p.grad is not None for p in model.parameters())


def test_batches_of_other_lengths_reuse_the_graph_and_match_eager():
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2, P_drop=0.0, norm_first=True)
    ).train()
    shapes = [(7, 6), (9, 4), (5, 8)]
    losses = run_steps(model, shapes, dynamic=True, backend="eager")
    assert_one_graph()
    for i, (S, T) in enumerate(shapes):
        src, tgt = batch(S, T, seed=i)
        eager = F.cross_entropy(model(src, tgt).flatten(0, 1), tgt.flatten(), ignore_index=0)
        torch.testing.assert_close(losses[i], eager.detach())


def test_bad_inputs_are_still_refused_in_eager_mode():
    model = Transformer(TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2))
    src, tgt = batch(5, 4, seed=0)
    with pytest.raises(ValueError, match=r"src holds ids outside the vocabulary \[0, 30\)"):
        model(src + V, tgt)


def test_the_accelerated_model_without_kernels_compiles_into_one_graph():
    # its CPU dropout draws a key with .random_() (a host read): under compile it steps
    # aside for PyTorch's dropout, which the compiler traces
    from transformer_lib import fast

    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(V, N=1, d_model=16, d_ff=32, h=2)).train()
    fast.accelerate(model, kernels=False)
    run_steps(model, [(7, 6)] * 2, dynamic=False, backend="eager")
    assert_one_graph()


# fast.compile_model: torch.compile on a CPU with Inductor's fallback_random and a ReLU
# backward that leaves no bool mask to the forward pass (transformer_lib/fast/inductor.py)


def test_relu_backward_without_bool_mask_matches_aten_s():
    from transformer_lib.fast.inductor import relu_backward

    g = torch.Generator().manual_seed(0)
    y = torch.randn(64, 33, generator=g).clamp_min(0)  # a ReLU's output: many exact zeros
    y[0, :5] = torch.tensor([0.5, 0.25, 0.0, 1.0, 0.5])  # values equal to a threshold
    grad = torch.randn(64, 33, generator=g)
    for threshold in (0.0, 0.5):
        want = torch.ops.aten.threshold_backward(grad, y, threshold)
        assert torch.equal(relu_backward(grad, y, threshold), want)
    assert (y == 0).any() and (torch.ops.aten.threshold_backward(grad, y, 0.0) == 0).any()


def bool_tensors_saved_by_the_forward(decompositions):
    """How many bool tensors the forward graph of a feed-forward layer with dropout hands to
    the backward, partitioned as Inductor partitions (min-cut), with these decompositions."""
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    from transformer_lib.feedforward import PositionwiseFeedForward

    saved = []

    def forward_compiler(gm, _):
        (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
        dtypes = [n.meta["val"].dtype for n in outputs if isinstance(n, torch.fx.Node)]
        saved.append(dtypes[1:].count(torch.bool))  # outputs[0] is the layer's output
        return make_boxed_func(gm)

    backend = aot_autograd(
        fw_compiler=forward_compiler,
        bw_compiler=lambda gm, _: make_boxed_func(gm),
        decompositions=decompositions,
        partition_fn=min_cut_rematerialization_partition,
    )
    torch._dynamo.reset()
    layer = PositionwiseFeedForward(16, 64, dropout=0.1).train()
    torch.compile(layer, backend=backend)(torch.randn(2, 5, 16)).sum().backward()
    assert len(saved) == 1
    return saved[0]


def test_compile_model_s_relu_backward_saves_no_bool_mask():
    import torch._inductor.config as inductor_config
    from torch._inductor.decomposition import select_decomp_table

    from transformer_lib.fast.inductor import CPU_SETTINGS, cpu_decompositions

    with inductor_config.patch(CPU_SETTINGS):
        inductors = dict(select_decomp_table())
    # Inductor's own table: dropout's mask and the mask y <= 0 of ReLU's backward
    assert bool_tensors_saved_by_the_forward(inductors) == 2
    assert bool_tensors_saved_by_the_forward(cpu_decompositions()) == 1  # dropout's only


def test_compile_model_on_a_cpu_draws_eager_s_dropout_masks():
    # Inductor for real (C++ code, built here); fallback_random: the same generator, the
    # same masks as the eager model, so the same loss and gradients
    from transformer_lib import fast
    from transformer_lib.feedforward import PositionwiseFeedForward

    torch.manual_seed(0)
    eager = PositionwiseFeedForward(16, 64, dropout=0.5).train()
    compiled = PositionwiseFeedForward(16, 64, dropout=0.5).train()
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(3, 7, 16)
    torch._dynamo.reset()
    step = fast.compile_model(compiled)
    for seed in (1, 2):
        torch.manual_seed(seed)
        want = eager(x)
        torch.manual_seed(seed)
        got = step(x)
        torch.testing.assert_close(got, want)
        want.square().sum().backward()
        got.square().sum().backward()
    for p, q in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(q.grad, p.grad)


def test_compile_model_leaves_other_devices_and_backends_to_torch_compile(monkeypatch):
    from transformer_lib.fast import inductor

    seen = []
    monkeypatch.setattr(torch, "compile", lambda model, **kw: seen.append(kw) or model)
    layer = torch.nn.Linear(2, 2)
    inductor.compile_model(layer)
    inductor.compile_model(layer, backend="eager")
    inductor.compile_model(layer, torch.device("cuda"), dynamic=True)
    assert seen == [{"backend": inductor.cpu_backend}, {"backend": "eager"}, {"dynamic": True}]
