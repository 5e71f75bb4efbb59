"""The translate command line, run in a subprocess against a checkpoint made here."""

import subprocess
import sys

import pytest
import torch

from transformer_lib.search import beam_search, greedy_decode

from cli_runs import tiny_checkpoint

LINES = ["5 March 2021", "", "03/05/21", "Saturday, 5th of march, 2021", "1 mai 1999"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random (untrained) model: the test checks the plumbing, not the quality."""
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    model, src_tok, tgt_tok = tiny_checkpoint(path, LINES)
    return path, model.eval(), src_tok, tgt_tok


def run_cli(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "transformer_lib.translate", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def expected(model, src_tok, tgt_tok, beam):
    """Each line decoded alone, in process: the CLI must batch without changing anything."""
    out = []
    for line in LINES:
        if not line:
            out.append("")
            continue
        src = torch.tensor([src_tok.encode(line)[:16]])  # cut to max_len
        ids = (
            greedy_decode(model, src, 16)
            if beam == 1
            else beam_search(model, src, 16, beam_size=beam)
        )
        out.append(tgt_tok.decode(ids[0].tolist()))
    return out


@pytest.mark.parametrize("beam", [1, 3])
def test_one_translation_per_line_in_input_order(checkpoint, beam):
    path, model, src_tok, tgt_tok = checkpoint
    result = run_cli(
        "--checkpoint", path, "--beam", beam, "--batch-size", 2, stdin="\n".join(LINES) + "\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:-1] == expected(model, src_tok, tgt_tok, beam)


def test_missing_checkpoint_is_named(tmp_path):
    path = tmp_path / "nowhere.pt"
    result = run_cli("--checkpoint", path, stdin="5 March 2021\n")
    assert result.returncode != 0 and result.stdout == ""
    assert "not found" in result.stderr and str(path) in result.stderr


def test_invalid_checkpoints_are_named(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_text("not a checkpoint")
    no_model = tmp_path / "no_model.pt"
    torch.save({"step": 3}, no_model)
    for path in (garbage, no_model):
        result = run_cli("--checkpoint", path, stdin="5 March 2021\n")
        assert result.returncode != 0 and result.stdout == ""
        assert "cannot load checkpoint" in result.stderr and str(path) in result.stderr


def test_max_len_beyond_the_model_is_refused(checkpoint):
    result = run_cli("--checkpoint", checkpoint[0], "--max-len", 1000, stdin="x\n")
    assert result.returncode != 0 and "--max-len" in result.stderr
