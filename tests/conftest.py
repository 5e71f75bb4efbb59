import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tiny():
    from transformer_lib import TransformerConfig

    return TransformerConfig.tiny(src_vocab_size=50, P_drop=0.0)
