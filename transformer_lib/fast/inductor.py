"""``torch.compile`` for training on a CPU: Inductor with two settings that stop it losing to
eager there.

    from transformer_lib.fast import compile_model
    step_model = compile_model(model)     # torch.compile(model, backend=...) on a CPU

On a CPU, :func:`compile_model` hands ``torch.compile`` a backend that is Inductor with

* ``fallback_random=True``: dropout draws its masks with PyTorch's own generator, as eager
  does (the same masks as the eager model for the same seed), once, and keeps them for the
  backward pass. Inductor's default draws every number with a fresh Philox engine and draws
  each mask again in the backward pass, which costs more than eager's ``bernoulli_``.
* ReLU's backward written as ``grad * max(sign(y - threshold), 0)`` instead of Inductor's
  ``where(y <= threshold, 0, grad)``. With the latter, when dropout follows the ReLU the
  forward pass saves the ``bool`` mask ``y <= 0`` for the backward pass, and Inductor's
  vectorised CPU code stores ``bool`` values through a slow conversion: a 1536 x 1024 mask
  took 15.7 ms against eager's 0.9 ms on a 2-core AVX2 EPYC (``benchmarks/inductor_cpu.py``).
  Written with ``sign`` the forward pass keeps the ReLU's float output, as eager does. The
  two agree wherever ``grad`` and ``y`` are finite.

Elsewhere (a GPU) it is plain ``torch.compile``, which already wins there. The figures are in
``benchmarks/README.md``; ``benchmarks/train_throughput.py --compile`` measures both.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import torch
from torch import nn

aten = torch.ops.aten

# Inductor's settings for the CPU backend; the pass below only names this recipe in
# Inductor's cache key, so a graph compiled without it is never reused for it (or back).
CPU_SETTINGS: Dict[str, Any] = {"fallback_random": True}
RECIPE = "transformer_lib.fast.inductor: fallback_random, float ReLU mask, v1"


def relu_backward(grad: torch.Tensor, y: torch.Tensor, threshold: float) -> torch.Tensor:
    """``aten.threshold_backward`` (ReLU's backward: ``grad`` where ``y > threshold``, else
    0) with no ``bool`` intermediate."""
    return grad * torch.sign(y - threshold).clamp_min(0)


def cpu_decompositions() -> Dict[Any, Callable[..., Any]]:
    """Inductor's own decomposition table under :data:`CPU_SETTINGS`, with ReLU's backward
    replaced by :func:`relu_backward`."""
    import torch._inductor.config as inductor_config
    from torch._inductor.decomposition import select_decomp_table

    with inductor_config.patch(CPU_SETTINGS):
        table = dict(select_decomp_table())
    table[aten.threshold_backward.default] = relu_backward
    return table


def _recipe_pass():
    """A post-grad pass that changes nothing; its ``uuid`` puts :data:`RECIPE` into the key
    of Inductor's compiled-graph cache (it leaves the table of decompositions out)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class RecipeName(CustomGraphPass):
        def __call__(self, graph: torch.fx.graph.Graph) -> None:
            return None

        def uuid(self) -> Optional[Any]:
            return RECIPE

    return RecipeName()


def cpu_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """The ``torch.compile`` backend of :func:`compile_model` on a CPU: Inductor with
    :data:`CPU_SETTINGS` and :func:`cpu_decompositions`."""
    from torch._inductor.compile_fx import compile_fx

    settings = {**CPU_SETTINGS, "post_grad_custom_post_pass": _recipe_pass()}
    return compile_fx(
        gm, example_inputs, decompositions=cpu_decompositions(), config_patches=settings
    )


def compile_model(model: nn.Module, device: Optional[torch.device] = None, **kwargs: Any):
    """``torch.compile(model, **kwargs)``, with :func:`cpu_backend` when the model trains on
    a CPU (``device``, else where its first parameter lives) and no ``backend`` is given."""
    if device is None:
        first = next(model.parameters(), None)
        device = first.device if first is not None else torch.device("cpu")
    if device.type == "cpu" and "backend" not in kwargs:
        kwargs["backend"] = cpu_backend
    return torch.compile(model, **kwargs)
