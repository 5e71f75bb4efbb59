"""transformer_lib: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Dimension legend, used in every shape comment of the package:

    B  batch size                 S  source length          T  target length
    D  d_model (model width)      H  number of heads (h)    d_k  per-head size, D / H
    V  vocabulary size            L  any sequence length

Masks are boolean with True = may attend, broadcastable to (B, H, T_q, T_k), and are built
in :mod:`transformer_lib.masks` only.
"""

import importlib
import sys
import types

# The public names and the module of each. They load on first use (PEP 562), all together:
# ``python -m transformer_lib.train`` then handles Ctrl-C before PyTorch loads, and
# ``python -m transformer_lib.doctor`` can say that PyTorch is missing instead of failing here.
_EXPORTS = {
    "attention": ["MultiHeadAttention", "attention", "fused_attention"],
    "config": ["TransformerConfig"],
    "decoder": ["Decoder", "DecoderLayer", "KVCache"],
    "embedding": ["TokenEmbedding"],
    "encoder": ["Encoder", "EncoderLayer"],
    "feedforward": ["PositionwiseFeedForward"],
    "masks": ["causal_mask", "combine", "decoder_mask", "padding_mask", "to_blocked"],
    "model": ["Transformer"],
    "positional": ["PositionalEncoding", "sinusoidal_table"],
    "residual": ["ResidualNorm"],
}
__all__ = [
    "Transformer",
    "TransformerConfig",
    "MultiHeadAttention",
    "attention",
    "fused_attention",
    "Encoder",
    "EncoderLayer",
    "Decoder",
    "DecoderLayer",
    "KVCache",
    "TokenEmbedding",
    "PositionalEncoding",
    "sinusoidal_table",
    "PositionwiseFeedForward",
    "ResidualNorm",
    "padding_mask",
    "causal_mask",
    "decoder_mask",
    "combine",
    "to_blocked",
]


def _load_exports() -> None:
    values = {}
    for module, names in _EXPORTS.items():
        loaded = importlib.import_module(f".{module}", __name__)
        values.update({name: getattr(loaded, name) for name in names})
    object.__setattr__(_package, "_loaded", True)
    vars(_package).update(values)


def __getattr__(name: str):
    if name in __all__ and not vars(_package).get("_loaded"):
        _load_exports()
        return vars(_package)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The package itself: the import system binds every loaded submodule on it; the
    function ``attention`` shares its module's name and stays the package's ``attention``."""

    def __setattr__(self, name, value):
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


_package = sys.modules[__name__]
_package.__class__ = _Package
__version__ = "0.1.0"
