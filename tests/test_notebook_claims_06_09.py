"""The numbers that the prose of notebooks 06, 07 and 09 (the appendix) states, computed from the library,
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
from transformer_lib.decoding import beam_search, greedy_decode
from transformer_lib.training import LabelSmoothingLoss
from transformer_lib.training.checkpoint import load_model
from transformer_lib.training.job import DataSpec, TrainJob, prepare
from transformer_lib.training.trainer import TrainSettings

from notebook_cells import cells, output_text, source

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["06_training.ipynb", "07_inference.ipynb", "09_appendix_performance.ipynb"]


@pytest.fixture(scope="module")
def date_tok():
    train = make_date_splits(n_train=20000, n_valid=1000, n_test=1000, seed=0)["train"]
    return CharTokenizer.train([s for s, _ in train] + [t for _, t in train])


# --- notebook 06, section 3: the floor of the smoothed loss, and perplexity --------------
def test_loss_floor_is_the_entropy_of_q_075_nats_for_the_date_vocabulary(date_tok):
    V, eps = date_tok.vocab_size, 0.1
    assert V == 78                                                   # "V = 78, K = 77"
    K = V - 1
    q_true, q_other = 1 - eps + eps / K, eps / K
    floor = -(q_true * math.log(q_true) + (K - 1) * q_other * math.log(q_other))
    assert round(floor, 2) == 0.75 and abs(floor - 0.7497) < 5e-5    # "about 0.75 nats"
    # it is the minimum of the library's loss: reached at p = q, raised by any other p
    q = torch.full((V,), q_other)
    q[0], q[5] = 0.0, q_true                                         # pad gets no mass
    logits = q.clamp_min(1e-30).log()[None, None]                    # (1, 1, V): p = q
    target = torch.tensor([[5]])
    loss = LabelSmoothingLoss(eps, ignore_index=0)
    assert abs(loss(logits, target).item() - floor) < 1e-5
    sharper = logits.clone()
    sharper[..., 5] += 1.0                                           # more sure of the truth
    assert loss(sharper, target).item() > floor + 1e-3
    # perplexity at that optimum: exp of the plain cross-entropy, 1 / 0.90 = 1.11, not e^0.75
    assert round(q_true, 2) == 0.90 and round(1 / q_true, 2) == 1.11
    assert round(math.exp(floor), 1) == 2.1


def test_mask_figure_row_has_eleven_padded_source_positions_and_no_target_padding(date_tok):
    pair = [("5 mars 2021", "2021-03-05"), ("Saturday, 5 March 2021", "2021-03-05")]
    demo = make_batch(encode_pairs(pair, date_tok, date_tok), [0, 1])
    assert (demo.src[0] == date_tok.pad_id).sum() == 11 and demo.src.shape[1] == 22
    assert demo.tgt_in.shape[1] == 11 and not (demo.tgt_in == date_tok.pad_id).any()


# --- notebook 07, section 4: when beam search changes the output -------------------------
@pytest.fixture(scope="module")
def shipped():
    model, src_tok, tgt_tok = load_model(ROOT / "checkpoints/dates.pt")
    test = make_date_splits(n_train=1)["test"]
    ids = [src_tok.encode(s) for s, _ in test]
    src = torch.full((len(ids), max(map(len, ids))), model.config.pad_id)
    for row, x in enumerate(ids):
        src[row, :len(x)] = torch.tensor(x)
    return model, src_tok, tgt_tok, test, src


def decode(tok, out):
    return [tok.decode(row.tolist()) for row in out]


def log_prob(model, tok, src, outputs):
    ids = [tok.encode(o, add_eos=True) for o in outputs]
    y = torch.full((len(ids), max(map(len, ids))), model.config.pad_id)
    for row, x in enumerate(ids):
        y[row, :len(x)] = torch.tensor(x)
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
    assert sum(g != b for g, b in zip(greedy, beam)) == 0            # "0 differences"


def test_after_400_steps_beam_changes_a_few_percent_mostly_for_the_better(shipped):
    torch.set_num_threads(1)
    model, src_tok, tgt_tok, test, src = shipped
    settings = TrainSettings(steps=400, max_tokens=1000, warmup=200, lr_factor=0.5, seed=0,
                             eval_limit=1, progress=False, verbose=False)
    job = TrainJob(DataSpec(task="dates"), model.config, settings)
    trainer = prepare(job, tokenizers=(src_tok, tgt_tok), device="cpu").trainer
    trainer.fit()
    early = trainer.model.eval()
    greedy = decode(tgt_tok, greedy_decode(early, src, 16))
    beam = decode(tgt_tok, beam_search(early, src, 16, 4, 0.6))
    changed = [i for i, (g, b) in enumerate(zip(greedy, beam)) if g != b]
    assert 10 <= len(changed) <= 100                                 # "a few percent"
    targets = [t for _, t in test]
    fixed = sum(beam[i] == targets[i] for i in changed)
    broken = sum(greedy[i] == targets[i] for i in changed)
    assert fixed > broken > 0                    # fixes more than it breaks, breaks some
    sub = src[changed]
    assert (log_prob(early, tgt_tok, sub, [beam[i] for i in changed])
            >= log_prob(early, tgt_tok, sub, [greedy[i] for i in changed])).float().mean() > 0.5


def prose(name: str) -> str:
    """The markdown of a notebook, every run of white space one space."""
    return " ".join(" ".join(source(c) for c in cells(name) if c["cell_type"] == "markdown").split())


def test_inference_quotes_the_task_s_five_languages_and_its_unstopped_timing_token(shipped):
    from transformer_lib.data.dates import DATE_FORMATS
    words = {f.split("_")[0] for f in DATE_FORMATS} - {"us", "eu", "iso", "ymd", "compact"}
    assert len(DATE_FORMATS) == 29 and words == {"en", "fr", "de", "es", "ja"}  # the rest: digits
    text = prose(NAMES[1])
    assert "29 formats, in five languages" in text and "four languages" not in text
    assert "five languages" in source(next(c for c in cells(NAMES[1])
                                           if source(c).startswith("**Your own input.**")))
    model, _, tgt_tok, _, src = shipped                                  # "never writes <unk>"
    out = greedy_decode(model, src[:32], 64, eos_id=tgt_tok.unk_id)
    assert out.shape == (32, 64) and not (out == tgt_tok.unk_id).any()


def test_inference_beam_against_greedy_is_the_shipped_translation_model_s():
    scores = torch.load(ROOT / "checkpoints/bible-en-fr.pt", weights_only=True,
                        map_location="cpu")["extra"]["scores"]
    text = prose(NAMES[1])
    assert f"{scores['beam']['bleu']:.1f} BLEU with beam {scores['beam']['size']}" in text
    assert f"against {scores['greedy']['bleu']:.1f} with greedy" in text
    assert f"{scores['test_verses']:,} held-out verses" in text
    assert "gained the paper BLEU" not in text and "reports no comparison" in text
    for term in ("n-grams", "clipped precisions", "brevity penalty", "geometric mean", "13a"):
        assert term in text, f"BLEU is used in notebook 07 without defining '{term}'"


def test_inference_encoder_heads_keep_the_year_and_the_month_together(shipped):
    model, src_tok, tgt_tok, _, _ = shipped
    src = torch.tensor([src_tok.encode("5 March 2021")])                 # (1, 12)
    out = greedy_decode(model, src, 16)
    y_in = torch.cat((torch.tensor([[tgt_tok.bos_id]]), out[:, :-1]), dim=1)
    with torch.no_grad():
        _, weights = model(src, y_in, need_weights=True)
    year, month = list(range(8, 12)), list(range(2, 7))
    share = [[round(100 * w[0, head][rows][:, rows].sum(-1).mean().item())
              for head in range(4)] for w in weights["encoder"] for rows in (year, month)]
    text = prose(NAMES[1])
    assert (share[2][0], share[2][2]) == (91, 82)                        # layer 1, the year
    assert (share[1][1], share[1][2]) == (84, 83)                        # layer 0, March
    assert "with 91 % and 82 % of their weight in layer 1, heads 0 and 2" in text
    assert "with 84 % and 83 % of their weight in layer 0, heads 1 and 2" in text
    assert "give 33 % and 42 %" in text and round(100 * 4 / 12) == 33 and round(100 * 5 / 12) == 42


PAPER_SECTIONS = {"1", "2", "3", "3.1", "3.2", "3.2.1", "3.2.2", "3.2.3", "3.3", "3.4", "3.5",
                  "4", "5", "5.1", "5.2", "5.3", "5.4", "6", "6.1", "6.2", "6.3", "7"}


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


# --- notebook 08: the figures quoted from benchmarks/README.md ---------------------------


def normalise(text: str) -> str:
    return text.replace("–", "-").replace("×", "x").replace("*", "")


def test_appendix_figures_are_those_of_the_benchmarks_readme():
    bench = normalise((ROOT / "benchmarks/README.md").read_text())
    text = "".join(source(c) for c in cells(NAMES[2]) if c["cell_type"] == "markdown")
    table = text[text.index("| what | figure |"):text.index("Where the fp32 lead")]
    figures = re.findall(r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?[×%]|\b0\.033\b|1/30", table)
    assert len(figures) >= 9
    for figure in figures:
        assert normalise(figure) in bench, f"{figure} is not in benchmarks/README.md"
    for fact in ("17 runs", "median 1.59×", "1.13×", "118 ms", "30 ms", "5.9× and 6.1×",
                 "2026-11-22", "2.13.0+cpu", "AVX512-BF16", "AMX"):
        assert normalise(fact) in bench and normalise(fact) in normalise(text), fact
    assert "Intel(R) Xeon(R)" in bench and "Intel Xeon" in text


# --- all three: opening cell, exercises, figures, stored outputs --------------------------


def test_training_output_is_one_line_per_validation_not_bar_fragments():
    nb = cells(NAMES[0])
    cell = next(c for c in nb if "history = trainer.fit()" in source(c))
    streams = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o["output_type"] == "stream")
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
                assert aside not in text, f"{name}: '{aside}' belongs in notebook 09"
