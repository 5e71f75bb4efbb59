"""transformer_lib.explorers without a browser: every control redraws the figure, the figure
shows what the library computes, and bad input becomes a message, not a traceback."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_lib import explorers  # noqa: E402
from transformer_lib.search import beam_search, greedy_decode  # noqa: E402


@pytest.fixture(scope="module")
def dates():
    from transformer_lib.training.checkpoint import load_model, shipped_checkpoint

    return load_model(shipped_checkpoint("dates"))


def redraws(explorer, name, value):
    """Set one control; True when the drawn PNG changed."""
    before = bytes(explorer.image.value)
    explorer.controls[name].value = value
    after = bytes(explorer.image.value)
    return after != before and after.startswith(b"\x89PNG")


def test_positional_encoding_every_slider_redraws():
    e = explorers.positional_encoding(d_model=64, position=20, dimension=6)
    assert bytes(e.image.value).startswith(b"\x89PNG") and plt.get_fignums() == []  # closed
    for name, value in (("d_model", 128), ("position", 90), ("dimension", 40)):
        assert redraws(e, name, value), name
    assert e.message.value.count("color:#b00020") == 0


def test_positional_encoding_dimension_follows_d_model():
    e = explorers.positional_encoding(d_model=64, dimension=50)
    e.controls["d_model"].value = 16
    assert e.controls["dimension"].max == 15 and e.controls["dimension"].value == 15


def test_masks_every_slider_redraws():
    e = explorers.masks(src_len=6, tgt_len=5, src_pad=2, tgt_pad=1)
    for name, value in (("src_len", 9), ("src_pad", 4), ("tgt_len", 7), ("tgt_pad", 3)):
        assert redraws(e, name, value), name
    e.controls["src_len"].value = 3  # padding cannot exceed length - 1
    assert e.controls["src_pad"].max == 2 and e.controls["src_pad"].value == 2


def test_masks_figure_is_the_library_masks(monkeypatch):
    drawn = []
    monkeypatch.setattr(
        explorers.plotting, "mask_grid", lambda mask, *a, **k: drawn.append(mask) or plt.gcf()
    )
    explorers.masks(src_len=4, tgt_len=3, src_pad=1, tgt_pad=1)
    from transformer_lib import decoder_mask

    tgt = torch.tensor([[4, 4, 0]])
    assert torch.equal(drawn[2], decoder_mask(tgt, 0))  # combined
    assert drawn[0][0, 0].tolist() == [[True, True, True, False]] * 4  # source padding
    assert drawn[1][0, 0].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]  # causal
    assert tuple(drawn[3].shape[-2:]) == (3, 4)  # cross: T x S


def test_attention_controls_redraw_and_translation_shown(dates):
    e = explorers.attention(dates, text="Friday, 5 March 2021")
    assert "translation: 2021-03-05" in e.message.value
    for name, value in (
        ("head", 2),
        ("layer", 1),
        ("kind", "encoder"),
        ("kind", "decoder_self"),
        ("text", "el 5 de marzo de 2021"),
    ):
        assert redraws(e, name, value), name
    assert "translation: 2021-03-05" in e.message.value


def test_attention_bad_input_is_a_message_not_a_traceback(dates):
    e = explorers.attention(dates)
    e.controls["text"].value = "5 марта 2021"  # Cyrillic: not in the vocabulary
    assert "vocabulary has no" in e.message.value and "&#x27;м&#x27;" in e.message.value
    assert e.image.layout.display == "none"
    e.controls["text"].value = "   "
    assert "it is empty" in e.message.value
    e.controls["text"].value = "5 March 2021"  # recovers
    assert "translation: 2021-03-05" in e.message.value and e.image.layout.display is None


def test_decoding_steps_are_greedy_and_beam_search(dates):
    model, src_tok, tgt_tok = dates
    text = "3/5/21"
    e = explorers.decoding(dates, text=text, beam_size=3)
    button = e.buttons["next token"]
    images = {bytes(e.image.value)}
    while not button.disabled:
        button.click()
        images.add(bytes(e.image.value))
    src = torch.tensor([src_tok.encode(text)])
    greedy = tgt_tok.decode(greedy_decode(model, src, 128)[0].tolist())
    beam = tgt_tok.decode(beam_search(model, src, 128, 3, 0.6)[0].tolist())
    assert f"greedy {greedy!r}" in e.message.value.replace("&#x27;", "'")
    assert f"beam's best {beam!r}" in e.message.value.replace("&#x27;", "'")
    steps = len(greedy) + 1  # with EOS
    assert len(images) >= steps and "both finished" in e.message.value
    e.buttons["restart"].click()
    assert "step 0" in e.message.value and not button.disabled


def test_decoding_bad_input_disables_the_button(dates):
    e = explorers.decoding(dates)
    assert redraws(e, "beam_size", 2)
    e.controls["text"].value = "5 März 2021 q"  # 'q' is not in the vocabulary
    assert "vocabulary has no &#x27;q&#x27;" in e.message.value
    assert e.buttons["next token"].disabled
    e.buttons["next token"].click()  # does nothing, raises nothing


def test_stored_text_is_the_same_every_run(dates):
    bundles = [explorers.positional_encoding()._repr_mimebundle_() for _ in range(2)]
    assert bundles[0]["text/plain"] == bundles[1]["text/plain"]
    assert "explorer" in bundles[0]["text/plain"]
    ids = {b["application/vnd.jupyter.widget-view+json"]["model_id"] for b in bundles}
    assert len(ids) == 2  # random ids: nbval must skip them


def test_missing_checkpoint_names_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match="model must be a checkpoint file"):
        explorers.attention(tmp_path / "none.pt")
