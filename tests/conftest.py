import os
import signal

import pytest
import torch

from transformer_lib.exercises import own_work

# pytest -n 2 runs two tests at a time, each in its own process. With PyTorch's default (a
# thread per core) in each, two busy tests run four threads on two cores and wait for each
# other's; one thread per test and core does the same work sooner. OMP_NUM_THREADS passes the
# same count on to the notebooks' kernels and the command lines that the tests start.
if os.environ.get("PYTEST_XDIST_WORKER"):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    threads = max(1, (os.cpu_count() or 1) // workers)
    torch.set_num_threads(threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (tests/test_cuda.py)")
    config.addinivalue_line("markers", "gpu_training: a training run of a minute or two on a GPU")
    config.addinivalue_line(
        "markers", "slow: a test of a minute or more (runs in the test command)"
    )
    config.addinivalue_line(
        "markers", "learner: the checkers refuse their own right answers, as for a learner"
    )


@pytest.fixture(autouse=True)
def _checkers_take_their_own_right_answers(request, monkeypatch):
    """Tests check the checkers with the right answers the checker modules hold; a learner's
    answer may not be one of them (own_work.guard), which the tests marked learner check."""
    if request.node.get_closest_marker("learner") is None:
        monkeypatch.setattr(own_work, "TESTS_GIVE_RIGHT_ANSWERS", True)


@pytest.fixture(autouse=True)
def _seed_threads_and_signals():
    """Every test starts from seed 0; what a command line's main() changes in the process
    (torch's thread count, --threads; its SIGINT and SIGTERM handlers) is put back after."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    torch.set_num_threads(threads)
    for s, handler in handlers.items():
        signal.signal(s, handler)


# a tiny run of the date task for the command line: seconds, one thread, nothing compiled
TINY_DATES = (
    "--task dates --n-train 60 --n-valid 4 --n-test 4 --d-model 16 --d-ff 32 --layers 1 "
    "--heads 2 --max-tokens 150 --warmup 3 --eval-limit 4 --no-progress --threads 1 "
    "--no-compiled-kernels --no-keep-freed-memory"
).split()


@pytest.fixture
def tiny_dates():
    """The flags of a tiny date run (``python -m transformer_lib.train``), without --out."""
    return list(TINY_DATES)


@pytest.fixture
def tiny():
    from transformer_lib.config import TransformerConfig

    return TransformerConfig.tiny(src_vocab_size=50, P_drop=0.0)


@pytest.fixture(scope="session")
def dates_model():
    """The shipped date checkpoint: (model, tokenizer)."""
    from transformer_lib.checkpoint import load_model, shipped_checkpoint

    return load_model(shipped_checkpoint("dates"))
