"""transformer_lib: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Each concept is one module, imported from where it lives::

    from transformer_lib.config import TransformerConfig
    from transformer_lib.model import Transformer

Dimension legend, used in every shape comment of the package:

    B  batch size                 S  source length          T  target length
    D  d_model (model width)      H  number of heads (h)    d_k  per-head size, D / H
    V  vocabulary size            L  any sequence length

Masks are boolean with True = may attend, broadcastable to (B, H, T_q, T_k), and are built
in :mod:`transformer_lib.masks` only.
"""

__version__ = "0.2.0"
