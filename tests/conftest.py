import os

import pytest
import torch

# pytest -n 2 runs two tests at a time, each in its own process. With PyTorch's default (a
# thread per core) in each, two busy tests run four threads on two cores and wait for each
# other's; one thread per test and core does the same work sooner. A test that needs a thread
# count sets it itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tiny():
    from transformer_lib import TransformerConfig

    return TransformerConfig.tiny(src_vocab_size=50, P_drop=0.0)
