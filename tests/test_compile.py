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
