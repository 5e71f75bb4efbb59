import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tiny():
    from transformer_lib import TransformerConfig

    return TransformerConfig.tiny(src_vocab_size=50, P_drop=0.0)


# The two notebooks that train (minutes each) go first. pytest-xdist (--dist loadscope)
# hands whole files to the workers in collection order, and notebooks/ is collected after
# tests/: started last, the longest file would run alone while the other worker sits idle.
LONGEST_FIRST = ("notebooks/09_translation.ipynb", "notebooks/07_training.ipynb")


def pytest_collection_modifyitems(config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST_FIRST)))
