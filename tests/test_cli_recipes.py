"""A built-in corpus brings its own defaults (its tuned recipe); flags given on the command line
win, and the model's part applies only without --preset and --resume
(transformer_lib.cli.train_args)."""

from pathlib import Path

import pytest

from transformer_lib.cli import train_command as train_cli
from transformer_lib.cli.recipes import CORPUS_RECIPES, recipe_flags
from transformer_lib.cli.train_setup import job_from

RECIPE = CORPUS_RECIPES["bible-en-fr"]


def parse(*flags):
    return train_cli.build_parser().parse_args([*flags, "--out", "runs/x"])


@pytest.mark.parametrize("corpus", [["--corpus", "bible-en-fr"], ["--corpus=bible-en-fr"]])
def test_the_corpus_brings_its_recipe(corpus):
    args = parse(*corpus)
    for dest, value in {**RECIPE["model"], **RECIPE["training"]}.items():
        assert getattr(args, dest) == value, dest
    assert args.preset == "tiny"  # the base the sizes override; every size is given


def test_a_flag_given_wins_over_the_recipe_before_or_after_the_corpus():
    first = parse("--d-model", "64", "--corpus", "bible-en-fr", "--max-tokens", "500")
    assert (first.d_model, first.max_tokens) == (64, 500)
    assert first.layers == RECIPE["model"]["layers"]
    assert first.warmup == RECIPE["training"]["warmup"]


def test_a_switch_of_the_recipe_can_be_turned_off():
    assert parse("--corpus", "bible-en-fr").norm_first is RECIPE["model"]["norm_first"]
    assert parse("--corpus", "bible-en-fr", "--no-norm-first").norm_first is False
    assert parse("--task", "dates").norm_first is None  # the preset's own (post-norm)
    flags = recipe_flags("bible-en-fr")
    assert ("--norm-first" if RECIPE["model"]["norm_first"] else "--no-norm-first") in flags
    assert "True" not in flags and "False" not in flags


def test_a_preset_keeps_its_own_sizes_and_takes_the_recipe_s_training():
    args = parse("--corpus", "bible-en-fr", "--preset", "base")
    assert (args.preset, args.d_model, args.layers, args.dropout) == ("base", None, None, None)
    assert args.max_tokens == RECIPE["training"]["max_tokens"]


def test_a_resumed_run_takes_the_checkpoint_s_model_not_the_recipe_s():
    args = parse("--corpus", "bible-en-fr", "--resume")
    assert (args.d_model, args.layers, args.dropout, args.norm_first) == (None, None, None, None)
    assert args.lr_factor == RECIPE["training"]["lr_factor"]


def test_without_a_corpus_the_defaults_are_the_generic_ones():
    args = parse("--task", "dates")
    generic = train_cli.build_parser().parse_args(["--out", "x"])
    assert (args.d_model, args.vocab_size, args.max_tokens, args.preset) == (
        None,
        generic.vocab_size,
        generic.max_tokens,
        "tiny",
    )
    assert (args.warmup, args.vocab_size) != (
        RECIPE["training"]["warmup"],
        RECIPE["training"]["vocab_size"],
    )


def test_the_job_of_a_corpus_run_holds_the_recipe(tmp_path):
    job = job_from(parse("--corpus", "bible-en-fr"), Path(tmp_path) / "c.pt")
    config = job.model.config(RECIPE["training"]["vocab_size"])
    model = RECIPE["model"]
    assert (config.d_model, config.N, config.h, config.d_ff, config.P_drop, config.max_len) == (
        model["d_model"],
        model["layers"],
        model["heads"],
        model["d_ff"],
        model["dropout"],
        model["max_len"],
    )
    assert config.norm_first is model["norm_first"]
    assert job.data.vocab_size == RECIPE["training"]["vocab_size"]
    assert (job.settings.max_tokens, job.settings.warmup, job.settings.lr_factor) == (
        RECIPE["training"]["max_tokens"],
        RECIPE["training"]["warmup"],
        RECIPE["training"]["lr_factor"],
    )


def test_help_lists_the_recipe_as_flags(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--corpus bible-en-fr: " + " ".join(recipe_flags("bible-en-fr")) in out


def test_a_bad_corpus_is_still_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        parse("--corpus", "klingon")
    assert info.value.code == 2
    assert "argument --corpus: invalid choice: 'klingon'" in capsys.readouterr().err
