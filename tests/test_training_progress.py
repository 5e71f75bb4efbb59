"""How the training loop reports progress: in a notebook, one status line updated in place
and one plain line per validation, never a stream of progress-bar fragments."""

import pytest
import torch

from transformer_lib import Transformer, TransformerConfig
from transformer_lib.data.batching import encode_pairs
from transformer_lib.data.tokenizers import CharTokenizer
from transformer_lib.training import progress_display
from transformer_lib.training.trainer import Trainer, TrainSettings

PAIRS = [
    ("one two", "1 2"),
    ("three", "3"),
    ("two one three", "2 1 3"),
    ("four one", "4 1"),
    ("three four two", "3 4 2"),
    ("one", "1"),
    ("two two", "2 2"),
    ("four", "4"),
]


class FakeHandle:
    """Stands for IPython's DisplayHandle: records every text it is asked to show."""

    def __init__(self):
        self.shown = []

    def update(self, data, raw=False):
        assert raw and set(data) == {"text/plain"}
        self.shown.append(data["text/plain"])


@pytest.fixture
def handles(monkeypatch):
    made = []

    def display(data, raw=False, display_id=False):
        assert raw and display_id is True  # updatable in place
        made.append(FakeHandle())
        made[-1].shown.append(data["text/plain"])
        return made[-1]

    IPython_display = pytest.importorskip("IPython.display")
    monkeypatch.setattr(IPython_display, "display", display)
    return made


def tiny_trainer(**kw):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tok = CharTokenizer.train([s for s, _ in PAIRS] + [t for _, t in PAIRS])
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, max_len=32))
    settings = TrainSettings(
        steps=6, max_tokens=40, warmup=3, eval_limit=2, decode_max_len=6, bleu_tokenize="char", **kw
    )
    return Trainer(model, tok, tok, encode_pairs(PAIRS, tok, tok), PAIRS[:2], settings, "cpu")


def test_notebook_progress_prints_one_clean_line_per_validation(handles, capsys):
    tiny_trainer(progress="notebook", eval_every=2).fit()
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 3 and all(
        line.startswith(f"step {s}: val loss") for line, s in zip(lines, (2, 4, 6))
    )
    assert "\r" not in out and err == ""  # no bar fragments anywhere
    assert len(handles) == 1  # one status line, updated
    assert handles[0].shown[0].startswith("train: step 0/6")
    assert handles[0].shown[-1].startswith("train: step 6/6")
    assert "loss" in handles[0].shown[-1]


def test_terminal_bar_is_unchanged_and_false_shows_only_messages(handles, capsys):
    tiny_trainer(progress=True, eval_every=3).fit()
    _, err = capsys.readouterr()
    assert "train:" in err and handles == []  # tqdm on stderr, no display
    tiny_trainer(progress=False, eval_every=3).fit()
    out, err = capsys.readouterr()
    assert out.count("val loss") == 2 and "train:" not in err + out


def test_status_line_is_throttled_but_the_last_step_always_shows():
    handle = FakeHandle()
    bar = progress_display.StatusLine(total=1000, handle=handle, min_interval=3600.0)
    for _ in range(1000):
        bar.update(1)
    bar.set_postfix(loss="0.750")
    bar.close()
    assert len(handle.shown) == 2  # the first update, then close
    assert handle.shown[-1].startswith("train: step 1000/1000") and "loss 0.750" in handle.shown[-1]


@pytest.mark.parametrize("bad", ["bar", 1, None, "Notebook"])
def test_bad_progress_style_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="progress must be True, False or 'notebook'"):
        TrainSettings(progress=bad)
