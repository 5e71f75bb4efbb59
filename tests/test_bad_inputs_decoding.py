"""Bad inputs to decoding (greedy, beam search, the Beam) and to the explorers that step
through it: one TypeError or ValueError naming the argument, what was given and what was
expected; an explorer refuses at construction, and an error inside a widget callback becomes
its message."""

import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_lib import Transformer, TransformerConfig, explorers  # noqa: E402
from transformer_lib.search import Beam, beam_search, greedy_decode  # noqa: E402

CONFIG = TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=12, P_drop=0.0, max_len=16)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(CONFIG)


@pytest.fixture(scope="module")
def dates():
    from transformer_lib.training.checkpoint import load_model, shipped_checkpoint

    return load_model(shipped_checkpoint("dates"))


SRC = torch.tensor([[4, 5, 6], [7, 8, 0]])


# greedy decoding and beam search ---------------------------------------------------------
@pytest.mark.parametrize(
    "decode, kwargs, error, match",
    [
        (
            greedy_decode,
            dict(eos_id=0),
            ValueError,
            r"^eos_id must differ from the padding id \(config.pad_id=0\), got 0: padding is never "
            r"produced, so decoding could not stop$",
        ),
        (beam_search, dict(eos_id=0), ValueError, r"^eos_id must differ from the padding id"),
        (
            beam_search,
            dict(length_penalty=math.nan),
            ValueError,
            r"^length_penalty must be a finite number, got nan$",
        ),
        (
            beam_search,
            dict(length_penalty=math.inf),
            ValueError,
            r"^length_penalty must be a finite number, got inf$",
        ),
        (
            beam_search,
            dict(length_penalty=-1.0),
            ValueError,
            r"^length_penalty must be in \[0.0, inf\], got -1.0$",
        ),
        (
            beam_search,
            dict(length_penalty="0.6"),
            TypeError,
            r"^length_penalty must be a number, got '0.6' \(str\)$",
        ),
        (beam_search, dict(length_penalty=True), TypeError, r"^length_penalty must be a number"),
        (beam_search, dict(beam_size=2.0), TypeError, r"^beam_size must be an integer, got 2.0"),
        (greedy_decode, dict(max_len=True), TypeError, r"^max_len must be an integer, got True"),
        (
            greedy_decode,
            dict(max_len=17),
            ValueError,
            r"^max_len must be <= the model's positional table \(config.max_len=16\), got 17$",
        ),
        (greedy_decode, dict(bos_id=12), ValueError, r"^bos_id must be at most 11, got 12$"),
        (
            greedy_decode,
            dict(eos_id="2"),
            TypeError,
            r"^eos_id must be an integer, got '2' \(str\)$",
        ),
    ],
    ids=lambda v: v.__name__ if callable(v) and hasattr(v, "__name__") else None,
)
def test_decoding_bad_input_is_named(model, decode, kwargs, error, match):
    args = {"max_len": 5, **kwargs}
    with pytest.raises(error, match=match) as info:
        decode(model, SRC, **args)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 4), ValueError, r"^B \(batch size\) must be at least 1, got 0$"),
        ((2, 0), ValueError, r"^K \(beam size\) must be at least 1, got 0$"),
        ((2, -3), ValueError, r"^K \(beam size\) must be at least 1, got -3$"),
        ((2.0, 4), TypeError, r"^B \(batch size\) must be an integer, got 2.0 \(float\)$"),
        ((2, True), TypeError, r"^K \(beam size\) must be an integer, got True \(bool\)$"),
        ((2, 4, 1, 0, 0), ValueError, r"^eos_id must differ from pad_id, got 0 for both$"),
        (
            (2, 4, 1, 2, 0, math.nan),
            ValueError,
            r"^alpha \(length_penalty\) must be a finite number, got nan$",
        ),
        ((2, 4, 1, 2, 0, -5.0), ValueError, r"^alpha \(length_penalty\) must be in \[0.0, inf\]"),
        ((2, 4, None, 2, 0), TypeError, r"^bos_id must be an integer, got None"),
    ],
)
def test_beam_bad_sizes_are_named(args, error, match):
    full = (*args, *(1, 2, 0, 0.6)[len(args) - 2 :], "cpu")
    with pytest.raises(error, match=match):
        Beam(*full)


def test_beam_log_probs_of_the_wrong_shape_are_named():
    beam = Beam(2, 3, 1, 2, 0, 0.6, "cpu")
    with pytest.raises(
        ValueError,
        match=r"^log_probs must be a float tensor of shape "
        r"\(B\*K, V\) = \(6, V\), got \(4, 12\)$",
    ):
        beam.advance(torch.randn(4, 12).log_softmax(-1), 1)
    beam.advance(torch.randn(6, 12).log_softmax(-1), 1)  # right shape: works


# explorers: refused at construction --------------------------------------------------------
@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda d: explorers.positional_encoding(max_len=0),
            ValueError,
            r"^max_len must be at least 1, got 0$",
        ),
        (
            lambda d: explorers.positional_encoding(position=200),
            ValueError,
            r"^position must be at most 127, got 200$",
        ),
        (
            lambda d: explorers.positional_encoding(d_model=10),
            ValueError,
            r"^d_model must be a multiple of 8 \(the slider's step\), got 10$",
        ),
        (
            lambda d: explorers.positional_encoding(dimension=64),
            ValueError,
            r"^dimension must be at most 63, got 64$",
        ),
        (lambda d: explorers.masks(src_len=0), ValueError, r"^src_len must be at least 1, got 0$"),
        (
            lambda d: explorers.masks(tgt_len=20),
            ValueError,
            r"^tgt_len must be at most 12, got 20$",
        ),
        (
            lambda d: explorers.masks(src_len=3, src_pad=3),
            ValueError,
            r"^src_pad must be at most 2, got 3$",
        ),
        (
            lambda d: explorers.masks(tgt_pad=-1),
            ValueError,
            r"^tgt_pad must be at least 0, got -1$",
        ),
        (
            lambda d: explorers.attention(model=123),
            TypeError,
            r"^model must be None, a shipped checkpoint's name \['bible-en-fr', 'dates'\], a "
            r"checkpoint path or \(model, src_tokenizer, tgt_tokenizer\), got 123 \(int\)$",
        ),
        (lambda d: explorers.decoding(model=123), TypeError, r"^model must be None, a shipped"),
        (
            lambda d: explorers.attention(model=(1, 2, 3)),
            TypeError,
            r"^model must be \(model, src_tokenizer, tgt_tokenizer\) as load_model returns, got "
            r"\(int, int, int\)$",
        ),
        (lambda d: explorers.attention(d, text=5), TypeError, r"^text must be a str, got int$"),
        (
            lambda d: explorers.decoding(d, top=1000),
            ValueError,
            r"^top must be at most \d+, got 1000$",
        ),
        (lambda d: explorers.decoding(d, top=0), ValueError, r"^top must be at least 1, got 0$"),
        (
            lambda d: explorers.decoding(d, length_penalty=-5),
            ValueError,
            r"^length_penalty must be in \[0.0, inf\], got -5.0$",
        ),
        (
            lambda d: explorers.decoding(d, length_penalty=math.nan),
            ValueError,
            r"^length_penalty must be a finite number, got nan$",
        ),
        (
            lambda d: explorers.decoding(d, beam_size=9),
            ValueError,
            r"^beam_size must be at most 8, got 9$",
        ),
        (
            lambda d: explorers.StepDecoder(d[0], torch.tensor([[5, 6]]), 2, 0.6, 1, 2, top=0),
            ValueError,
            r"^top must be at least 1, got 0$",
        ),
    ],
)
def test_explorers_refuse_at_construction(dates, make, error, match):
    with pytest.raises(error, match=match):
        make(dates)


def test_an_error_in_the_button_callback_is_shown_not_lost(dates, monkeypatch):
    e = explorers.decoding(dates)
    stepper_class = explorers.StepDecoder

    def broken(self):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(stepper_class, "step", broken)
    e.buttons["next token"].click()  # raises nothing ...
    assert "RuntimeError: out of memory" in e.message.value  # ... and says why
    assert "color:#b00020" in e.message.value


def test_an_unexpected_error_in_a_redraw_is_shown(dates, monkeypatch):
    e = explorers.masks()
    monkeypatch.setattr(
        explorers.encoding.plt,
        "subplots",
        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no display")),
    )
    e.controls["src_len"].value = 9
    assert "RuntimeError: no display" in e.message.value and e.image.layout.display == "none"
