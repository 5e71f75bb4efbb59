"""The numbers that the prose of notebooks 07, 08 and 10 (the appendix) states, computed from the library,
and the shape of those notebooks: opening cell, exercises, figure widths, stored outputs.

When the library changes, these fail before the prose silently goes wrong."""

import math
import re
from pathlib import Path

import pytest
import torch

from transformer_lib.data.batching import encode_pairs, make_batch
from transformer_lib.data.dates import make_date_splits
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.search import beam_search, greedy_decode
from transformer_lib.training import LabelSmoothingLoss
from transformer_lib.training.checkpoint import load_model
from transformer_lib.training.job import DataSpec, TrainJob, prepare
from transformer_lib.training.trainer import TrainSettings

from notebook_cells import cells, output_text, source

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["07_training.ipynb", "08_inference.ipynb", "10_appendix_performance.ipynb"]


@pytest.fixture(scope="module")
def date_tok():
    train = make_date_splits(n_train=20000, n_valid=1000, n_test=1000, seed=0)["train"]
    return CharTokenizer.train([s for s, _ in train] + [t for _, t in train])


# --- notebook 07, section 3: the floor of the smoothed loss, and perplexity --------------
def test_loss_floor_is_the_entropy_of_q_075_nats_for_the_date_vocabulary(date_tok):
    V, eps = date_tok.vocab_size, 0.1
    assert V == 78  # "V = 78, K = 77"
    K = V - 1
    q_true, q_other = 1 - eps + eps / K, eps / K
    floor = -(q_true * math.log(q_true) + (K - 1) * q_other * math.log(q_other))
    assert round(floor, 2) == 0.75 and abs(floor - 0.7497) < 5e-5  # "about 0.75 nats"
    # it is the minimum of the library's loss: reached at p = q, raised by any other p
    q = torch.full((V,), q_other)
    q[0], q[5] = 0.0, q_true  # pad gets no mass
    logits = q.clamp_min(1e-30).log()[None, None]  # (1, 1, V): p = q
    target = torch.tensor([[5]])
    loss = LabelSmoothingLoss(eps, ignore_index=0)
    assert abs(loss(logits, target).item() - floor) < 1e-5
    sharper = logits.clone()
    sharper[..., 5] += 1.0  # more sure of the truth
    assert loss(sharper, target).item() > floor + 1e-3
    # perplexity at that optimum: exp of the plain cross-entropy, 1 / 0.90 = 1.11, not e^0.75
    assert round(q_true, 2) == 0.90 and round(1 / q_true, 2) == 1.11
    assert round(math.exp(floor), 1) == 2.1


def test_mask_figure_row_has_eleven_padded_source_positions_and_no_target_padding(date_tok):
    pair = [("5 mars 2021", "2021-03-05"), ("Saturday, 5 March 2021", "2021-03-05")]
    demo = make_batch(encode_pairs(pair, date_tok, date_tok), [0, 1])
    assert (demo.src[0] == date_tok.pad_id).sum() == 11 and demo.src.shape[1] == 22
    assert demo.tgt_in.shape[1] == 11 and not (demo.tgt_in == date_tok.pad_id).any()


# --- notebook 07: the task, the paper's Table 3 row D, BLEU's tokenizer, the stored run ---
def notebook_07_text() -> str:
    return "\n".join(source(c) for c in cells(NAMES[0]))


def stored_output(start: str) -> str:
    return output_text(next(c for c in cells(NAMES[0]) if source(c).startswith(start)))


def test_date_task_is_29_formats_in_five_languages_and_sections_are_not_paragraph_signs():
    from transformer_lib.data.dates import DATE_FORMATS

    text = notebook_07_text()
    assert len(DATE_FORMATS) == 29 and "ja" in DATE_FORMATS
    assert "29 formats in five languages" in text and "four languages" not in text
    assert all(int(n) <= 7 for n in re.findall(r"§(\d+)", text))  # § is the paper's (1-7)


def test_table3_row_d_as_quoted():
    text = notebook_07_text()
    rows = {"0.0": (4.67, 25.3), "0.1 (base)": (4.92, 25.8), "0.2": (5.47, 25.7)}
    for eps, (ppl, bleu) in rows.items():
        assert f"| {eps} | {ppl} | {bleu} |" in text
    assert all(rows[e][0] > rows["0.0"][0] for e in ("0.1 (base)", "0.2"))  # perplexity up
    assert round(rows["0.1 (base)"][1] - rows["0.0"][1], 1) == 0.5  # "half a point"
    assert rows["0.2"][1] - rows["0.0"][1] > (rows["0.1 (base)"][1] - rows["0.0"][1]) / 2


def test_13a_splits_an_iso_date_and_scores_a_digit_slip_like_a_wrong_year():
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from transformer_lib.training.metrics import bleu

    assert Tokenizer13a()("2021-03-05").split() == ["2021", "-", "03", "-", "05"]
    slip, wrong = bleu(["2024-03-05"], ["2021-03-05"]), bleu(["1987-03-05"], ["2021-03-05"])
    assert round(slip, 1) == round(wrong, 1) == 66.9  # "both score 66.9"
    assert bleu(["2024-03-05"], ["2021-03-05"], tokenize="char") > bleu(
        ["1987-03-05"], ["2021-03-05"], tokenize="char"
    )  # "more credit"
    assert "both score 66.9" in notebook_07_text()


def test_sanity_run_memorises_its_batch_from_a_uniform_guess():
    out = stored_output("from transformer_lib.search import greedy_decode")
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+) nats", out)]
    assert len(losses) == 4 and abs(losses[0] - math.log(78)) < 0.5  # "about ln 78"
    assert losses[-1] < 0.05 and losses == sorted(losses, reverse=True)
    assert "8 of 8 dates reproduced exactly" in out


def stored_validations():
    out = stored_output("import time")
    found = re.findall(
        r"step (\d+): val loss (\d\.\d+)  exact match (\d+\.\d)%  BLEU (\d+\.\d)", out
    )
    return [(int(s), float(v), float(e), float(b)) for s, v, e, b in found]


def test_figure_caption_reads_the_stored_run():
    vals = stored_validations()
    assert len(vals) == 6  # every 500 steps; at 3000 the averaged model
    floor = 0.7497
    assert (vals[0][1] - floor) / (vals[-1][1] - floor) > 10  # "by a factor of ten and more"
    assert vals[0][3] > vals[0][2]  # "BLEU rises first"
    assert vals[-1][2] >= 99.0


def test_exercise_3_solution_finds_the_perplexity_of_the_smoothed_optimum():
    out = output_text(
        next(
            c
            for c in cells(NAMES[0])
            if "solution" in c["metadata"].get("tags", [])
            and "validation_cross_entropy" in source(c)
        )
    )
    nats, ppl = map(
        float, re.search(r"(\d\.\d+) nats per token, perplexity (\d\.\d+)", out).groups()
    )
    q_true = 1 - 0.1 + 0.1 / 77  # section 3: p(y) = 0.90
    assert ppl == round(1 / q_true, 2) == 1.11 and nats == round(-math.log(q_true), 2)


def test_the_dip_and_the_run_time_are_those_of_the_stored_run():
    from transformer_lib.training import noam_lr

    vals = {step: (loss, em) for step, loss, em, _ in stored_validations()}
    text = notebook_07_text()
    (l15, e15), (l20, e20), (_, e25) = vals[1500], vals[2000], vals[2500]
    assert f"from {e15} % at step 1500 to {e20} % at" in text and f"recovers to {e25} %" in text
    assert f"({l15:.3f} to {l20:.3f})" in text and l20 > l15  # the loss rises too
    assert f"scores {stored_validations()[-1][2]} %" in text
    rate = noam_lr(2000, 64, 200, 0.5)
    assert round(rate * 1e3, 1) == 1.4 and abs(rate / noam_lr(200, 64, 200, 0.5) - 1 / 3) < 0.02
    seconds = re.search(r"trained 3000 steps in (\d+) s", stored_output("import time")).group(1)
    head = source(cells(NAMES[0])[0])
    assert f"{seconds} s of it is the training run of section 5" in head
    assert f"3000 steps ({seconds} s on an otherwise idle 2-core AMD EPYC)" in text


# --- notebook 08, section 4: when beam search changes the output -------------------------
@pytest.fixture(scope="module")
def shipped():
    model, src_tok, tgt_tok = load_model(ROOT / "checkpoints/dates.pt")
    test = make_date_splits(n_train=1)["test"]
    ids = [src_tok.encode(s) for s, _ in test]
    src = torch.full((len(ids), max(map(len, ids))), model.config.pad_id)
    for row, x in enumerate(ids):
        src[row, : len(x)] = torch.tensor(x)
    return model, src_tok, tgt_tok, test, src


def decode(tok, out):
    return [tok.decode(row.tolist()) for row in out]


def log_prob(model, tok, src, outputs):
    ids = [tok.encode(o, add_eos=True) for o in outputs]
    y = torch.full((len(ids), max(map(len, ids))), model.config.pad_id)
    for row, x in enumerate(ids):
        y[row, : len(x)] = torch.tensor(x)
    y_in = torch.cat((torch.full((len(ids), 1), tok.bos_id), y[:, :-1]), dim=1)
    with torch.no_grad():
        logits = model(src, y_in)
    logits[..., model.config.pad_id] = float("-inf")
    lp = logits.log_softmax(-1).gather(2, y[..., None])[..., 0]
    return lp.masked_fill(y == model.config.pad_id, 0.0).sum(1)


def test_trained_model_beam_equals_greedy_on_every_test_date(shipped):
    torch.set_num_threads(1)
    model, _, tgt_tok, _, src = shipped
    greedy = decode(tgt_tok, greedy_decode(model, src, 16))
    beam = decode(tgt_tok, beam_search(model, src, 16, 4, 0.6))
    assert sum(g != b for g, b in zip(greedy, beam)) == 0  # "0 differences"


def test_after_400_steps_beam_changes_a_few_percent_mostly_for_the_better(shipped):
    torch.set_num_threads(1)
    model, src_tok, tgt_tok, test, src = shipped
    settings = TrainSettings(
        steps=400,
        max_tokens=1000,
        warmup=200,
        lr_factor=0.5,
        seed=0,
        eval_limit=1,
        progress=False,
        verbose=False,
    )
    job = TrainJob(DataSpec(task="dates"), model.config, settings)
    trainer = prepare(job, tokenizers=(src_tok, tgt_tok), device="cpu").trainer
    trainer.fit()
    early = trainer.model.eval()
    greedy = decode(tgt_tok, greedy_decode(early, src, 16))
    beam = decode(tgt_tok, beam_search(early, src, 16, 4, 0.6))
    changed = [i for i, (g, b) in enumerate(zip(greedy, beam)) if g != b]
    assert 10 <= len(changed) <= 100  # "a few percent"
    targets = [t for _, t in test]
    fixed = sum(beam[i] == targets[i] for i in changed)
    broken = sum(greedy[i] == targets[i] for i in changed)
    assert fixed > broken > 0  # fixes more than it breaks, breaks some
    sub = src[changed]
    assert (
        log_prob(early, tgt_tok, sub, [beam[i] for i in changed])
        >= log_prob(early, tgt_tok, sub, [greedy[i] for i in changed])
    ).float().mean() > 0.5


def prose(name: str) -> str:
    """The markdown of a notebook, every run of white space one space."""
    return " ".join(
        " ".join(source(c) for c in cells(name) if c["cell_type"] == "markdown").split()
    )


def test_inference_quotes_the_task_s_five_languages_and_its_unstopped_timing_token(shipped):
    from transformer_lib.data.dates import DATE_FORMATS

    words = {f.split("_")[0] for f in DATE_FORMATS} - {"us", "eu", "iso", "ymd", "compact"}
    assert len(DATE_FORMATS) == 29 and words == {"en", "fr", "de", "es", "ja"}  # the rest: digits
    text = prose(NAMES[1])
    assert "29 formats, in five languages" in text and "four languages" not in text
    assert "five languages" in source(
        next(c for c in cells(NAMES[1]) if source(c).startswith("**Your own input.**"))
    )
    model, _, tgt_tok, _, src = shipped  # "never writes <unk>"
    out = greedy_decode(model, src[:32], 64, eos_id=tgt_tok.unk_id)
    assert out.shape == (32, 64) and not (out == tgt_tok.unk_id).any()


def test_inference_beam_against_greedy_is_the_shipped_translation_model_s():
    scores = torch.load(ROOT / "checkpoints/bible-en-fr.pt", weights_only=True, map_location="cpu")[
        "extra"
    ]["scores"]
    text = prose(NAMES[1])
    assert f"{scores['beam']['bleu']:.1f} BLEU with beam {scores['beam']['size']}" in text
    assert f"against {scores['greedy']['bleu']:.1f} with greedy" in text
    assert f"{scores['test_verses']:,} held-out verses" in text
    assert "gained the paper BLEU" not in text and "reports no comparison" in text
    for term in ("n-grams", "clipped precisions", "brevity penalty", "geometric mean", "13a"):
        assert term in text, f"BLEU is used in notebook 08 without defining '{term}'"


def test_inference_encoder_heads_keep_the_year_and_the_month_together(shipped):
    model, src_tok, tgt_tok, _, _ = shipped
    src = torch.tensor([src_tok.encode("5 March 2021")])  # (1, 12)
    out = greedy_decode(model, src, 16)
    y_in = torch.cat((torch.tensor([[tgt_tok.bos_id]]), out[:, :-1]), dim=1)
    with torch.no_grad():
        _, weights = model(src, y_in, need_weights=True)
    year, month = list(range(8, 12)), list(range(2, 7))
    share = [
        [round(100 * w[0, head][rows][:, rows].sum(-1).mean().item()) for head in range(4)]
        for w in weights["encoder"]
        for rows in (year, month)
    ]
    text = prose(NAMES[1])
    assert (share[2][0], share[2][2]) == (91, 82)  # layer 1, the year
    assert (share[1][1], share[1][2]) == (84, 83)  # layer 0, March
    assert "with 91 % and 82 % of their weight in layer 1, heads 0 and 2" in text
    assert "with 84 % and 83 % of their weight in layer 0, heads 1 and 2" in text
    assert "give 33 % and 42 %" in text and round(100 * 4 / 12) == 33 and round(100 * 5 / 12) == 42


PAPER_SECTIONS = {
    "1",
    "2",
    "3",
    "3.1",
    "3.2",
    "3.2.1",
    "3.2.2",
    "3.2.3",
    "3.3",
    "3.4",
    "3.5",
    "4",
    "5",
    "5.1",
    "5.2",
    "5.3",
    "5.4",
    "6",
    "6.1",
    "6.2",
    "6.3",
    "7",
}


def test_inference_exercises_explained_solutions_marked_and_section_sign_means_the_paper():
    nb = cells(NAMES[1])
    posed = next(source(c) for c in nb if source(c).startswith("## Exercises"))
    assert "Each exercise is stated first" in posed and "not yet" in posed
    solutions = [source(c) for c in nb if "solution" in c["metadata"].get("tags", [])]
    assert len(solutions) == 3 and all(s.startswith("# Solution\n") for s in solutions)
    text = "\n".join(source(c) for c in nb)
    assert set(re.findall(r"§(\d+(?:\.\d+)*)", text)) <= PAPER_SECTIONS
    headings = len(re.findall(r"^## \d+\. ", text, re.M))
    assert all(int(n) <= headings for n in re.findall(r"\bsections? (\d+)", text))
    assert "compared when the notebook is checked" not in text


# --- notebook 09: the figures quoted from benchmarks/README.md ---------------------------


def normalise(text: str) -> str:
    return text.replace("–", "-").replace("×", "x").replace("*", "")


def test_appendix_figures_are_those_of_the_benchmarks_readme():
    bench = normalise((ROOT / "benchmarks/README.md").read_text())
    text = "".join(source(c) for c in cells(NAMES[2]) if c["cell_type"] == "markdown")
    table = text[text.index("| what | figure |") : text.index("Where the fp32 lead")]
    figures = re.findall(r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?[×%]|\b0\.033\b|1/30", table)
    assert len(figures) >= 9
    for figure in figures:
        assert normalise(figure) in bench, f"{figure} is not in benchmarks/README.md"
    for fact in (
        "17 runs",
        "median 1.59×",
        "1.13×",
        "118 ms",
        "30 ms",
        "5.9× and 6.1×",
        "2026-11-22",
        "2.13.0+cpu",
        "AVX512-BF16",
        "AMX",
    ):
        assert normalise(fact) in bench and normalise(fact) in normalise(text), fact
    assert "Intel(R) Xeon(R)" in bench and "Intel Xeon" in text


# --- all three: opening cell, exercises, figures, stored outputs --------------------------


def test_training_output_is_one_line_per_validation_not_bar_fragments():
    nb = cells(NAMES[0])
    cell = next(c for c in nb if "history = trainer.fit()" in source(c))
    streams = "".join(
        "".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream"
    )
    assert "\r" not in streams and "%|" not in streams and "it/s" not in streams
    assert len(re.findall(r"^step \d+: val loss", streams, re.M)) == 3000 // 500
    status = [o for o in cell["outputs"] if o["output_type"] == "display_data"]
    assert len(status) == 1 and "step 3000/3000" in output_text({"outputs": status})


def test_corpus_command_does_not_recommend_bf16_unconditionally():
    for cell in cells(NAMES[0]):
        for block in re.findall(r"```bash\n(.*?)```", source(cell), re.S):
            assert "--bf16" not in block
    text = "".join(source(c) for c in cells(NAMES[0]))
    assert "--bf16" in text and "AVX512-BF16" in text and "refuses" in text


def test_teaching_path_has_no_compiled_kernel_or_ci_asides():
    for name in NAMES[:2]:
        for cell in cells(name):
            text = source(cell)
            for aside in ("compiled kernel", "nbval", "--no-compiled-kernels", "_Beam"):
                assert aside not in text, f"{name}: '{aside}' belongs in notebook 10"
