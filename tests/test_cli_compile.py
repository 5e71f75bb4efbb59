"""``python -m transformer_lib.train --compile``: the training step through torch.compile."""

import pytest
import torch

from transformer_lib.cli import train_command as train_cli

TINY = [
    "--task",
    "dates",
    "--n-train",
    "60",
    "--n-valid",
    "4",
    "--n-test",
    "4",
    "--layers",
    "1",
    "--d-model",
    "16",
    "--d-ff",
    "32",
    "--heads",
    "2",
    "--max-tokens",
    "400",
    "--warmup",
    "2",
    "--eval-limit",
    "4",
    "--no-progress",
    "--threads",
    "1",
    "--dropout",
    "0",
]  # eager runs accelerate's dropout, compile the plain one


@pytest.fixture(autouse=True)
def _restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_compile_trains_the_same_model_as_eager(tmp_path, capsys):
    # the 'eager' backend traces the step with dynamo and runs it unchanged: the same losses
    assert (
        train_cli.main(
            [*TINY, "--steps", "4", "--out", str(tmp_path / "eager"), "--no-compiled-kernels"]
        )
        == 0
    )
    eager = torch.load(tmp_path / "eager" / "checkpoint.pt", weights_only=True)["history"]
    assert (
        train_cli.main(
            [*TINY, "--steps", "4", "--out", str(tmp_path / "compiled"), "--compile", "eager"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "torch.compile: on (backend eager)" in out
    compiled = torch.load(tmp_path / "compiled" / "checkpoint.pt", weights_only=True)["history"]
    assert len(compiled["loss"]) == 4
    torch.testing.assert_close(torch.tensor(compiled["loss"]), torch.tensor(eager["loss"]))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--compile", "--compiled-kernels"], "--compiled-kernels: not with --compile"),
        (["--compile", "tvm"], "argument --compile: invalid choice: 'tvm'"),
    ],
)
def test_compile_flag_mistakes_are_usage_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        train_cli.main([*TINY, "--steps", "2", "--out", str(tmp_path), *args])
    assert e.value.code == 2 and message in capsys.readouterr().err
