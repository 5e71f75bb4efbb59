"""What the figures and the explorers show is what the library computes: the plotted data
are the tables, masks and weights themselves; every explorer control redraws; bad input in
an explorer becomes a message, not a traceback. (Agg backend, nothing shown; headless.)"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_lib import explorers, plotting  # noqa: E402
from transformer_lib.attention import MultiHeadAttention  # noqa: E402
from transformer_lib.masks import causal_mask, decoder_mask  # noqa: E402
from transformer_lib.positional import sinusoidal_table  # noqa: E402
from transformer_lib.search import beam_search, greedy_decode  # noqa: E402

TOKENS = ["<s>", "the", "cat", "sat", "</s>"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def panels(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_positional_figures_plot_the_table_and_its_dot_products():
    table = sinusoidal_table(40, 16)
    image = plotting.positional_heatmap(table).axes[0].images[0].get_array()
    torch.testing.assert_close(torch.as_tensor(image.data), table)
    lines = plotting.positional_curves(table, dims=[0, 3, 10]).axes[0].get_lines()
    assert len(lines) == 3
    torch.testing.assert_close(torch.as_tensor(lines[1].get_ydata()), table[:, 3])
    x, y = plotting.positional_similarity(table, 10).axes[0].get_lines()[0].get_data()
    assert list(x) == list(range(-10, 30))
    torch.testing.assert_close(torch.as_tensor(y), table @ table[10])
    with pytest.raises(ValueError, match="dims"):
        plotting.positional_curves(table, dims=[16])
    with pytest.raises(ValueError, match="position"):
        plotting.positional_similarity(table, 40)


def test_attention_heads_draw_each_head_with_its_tokens():
    _, w = MultiHeadAttention(8, 4).eval()(torch.randn(1, 5, 8), need_weights=True)
    fig = plotting.attention_heads(w, TOKENS)
    heads = panels(fig)
    assert len(heads) == 4 and len(fig.axes) == 5  # one shared colour bar
    for k, ax in enumerate(heads):  # keys under every panel, queries beside each row
        assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
        assert [t.get_text() for t in ax.get_yticklabels()] == (TOKENS if k == 0 else [])
    torch.testing.assert_close(torch.as_tensor(heads[3].images[0].get_array().data), w[0, 3])
    layers = [torch.rand(1, 2, 3, 5).softmax(-1) for _ in range(3)]  # 3 layers, 2 heads
    fig = plotting.attention_heads(layers, TOKENS[:3], TOKENS, query_label="q", key_label="k")
    assert len(panels(fig)) == 6
    torch.testing.assert_close(
        torch.as_tensor(panels(fig)[5].images[0].get_array().data), layers[2][0, 1]
    )
    with pytest.raises(ValueError, match="key tokens"):
        plotting.attention_heads(layers, TOKENS[:3], TOKENS[:4])


def test_one_head_up_close_keeps_its_number_and_its_weights():
    layers = [torch.rand(1, 4, 3, 5).softmax(-1) for _ in range(2)]  # 2 layers, 4 heads
    fig = plotting.attention_heads(layers[1], TOKENS[:3], TOKENS, heads=[3], row_labels=["layer 2"])
    (panel,) = panels(fig)
    assert panel.get_title() == "layer 2, head 3"
    torch.testing.assert_close(torch.as_tensor(panel.images[0].get_array().data), layers[1][0, 2])
    fig = plotting.attention_heads(layers, TOKENS[:3], TOKENS, heads=[4, 1])
    assert [ax.get_title() for ax in panels(fig)] == [
        "layer 1, head 4",
        "layer 1, head 1",
        "layer 2, head 4",
        "layer 2, head 1",
    ]
    for bad in ([0], [5], []):
        with pytest.raises(ValueError, match="heads"):
            plotting.attention_heads(layers, TOKENS[:3], TOKENS, heads=bad)


def test_in_the_series_style_every_text_of_a_figure_is_at_least_the_style_size():
    """Tick labels, legends and titles of the library's figures are no smaller than the
    style's text (what the slides' readability rests on), and a heatmap's rows and columns
    are as wide as its labels are tall, however many and however long its tokens."""
    short = [f"t{i}" for i in range(20)]
    long = [f"a_longer_token_{i}→x" for i in range(12)]
    table = sinusoidal_table(40, 16)
    size = plotting.STYLE["font.size"]
    with plt.style.context(plotting.STYLE):
        heatmaps = [
            plotting.attention_heads(torch.rand(2, 4, 20, 20), short, columns=4, cell=0.1),
            plotting.attention_heads(torch.rand(1, 4, 12, 6), long, short[:6], columns=2),
            plotting.attention_heads(torch.rand(4, 6, 12), short[:6], long, heads=[1, 3]),
        ]
        figures = heatmaps + [
            plotting.positional_curves(table, dims=[0, 1]),
            plotting.positional_similarity(table, 3),
            plotting.mask_grid(causal_mask(20), short),
            plotting.per_layer_lines({"a": [1.0, 2.0], "b": [2.0, 1.0]}),
        ]
        for fig in figures:
            fig.canvas.draw()
            sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
            assert min(sizes) >= size, (fig, min(sizes))
        for fig in heatmaps:
            px = size * fig.dpi / 72  # the labels' height in pixels
            for ax in panels(fig):
                box, (t_q, t_k) = ax.get_window_extent(), ax.images[0].get_array().shape
                assert box.height / t_q >= px and box.width / t_k >= px, (box, t_q, t_k)
            drawn = [ax.get_tightbbox() for ax in panels(fig)]  # each panel with its labels
            for i, a in enumerate(drawn):
                assert not [b for b in drawn[i + 1 :] if a.overlaps(b)], "panels overlap"


def test_mask_grid_draws_the_mask():
    fig = plotting.mask_grid(causal_mask(4), TOKENS[:4])
    grid = torch.as_tensor(fig.axes[0].images[0].get_array().data)
    assert torch.equal(grid.bool(), causal_mask(4)[0, 0])
    with pytest.raises(TypeError, match="mask"):
        plotting.mask_grid(torch.ones(3, 3))


def redraws(explorer, name, value):
    """Set one control; True when the drawn PNG changed."""
    before = bytes(explorer.image.value)
    explorer.controls[name].value = value
    after = bytes(explorer.image.value)
    return after != before and after.startswith(b"\x89PNG")


def test_the_positional_and_mask_explorers_redraw_on_every_control(monkeypatch):
    e = explorers.positional_encoding(d_model=64, position=20, dimension=6)
    for name, value in (("d_model", 128), ("position", 90), ("dimension", 40)):
        assert redraws(e, name, value), name
    e.controls["d_model"].value = 16
    assert e.controls["dimension"].value == 15 and plt.get_fignums() == []  # figures closed
    e = explorers.masks(src_len=6, tgt_len=5, src_pad=2, tgt_pad=1)
    for name, value in (("src_len", 9), ("src_pad", 4), ("tgt_len", 7), ("tgt_pad", 3)):
        assert redraws(e, name, value), name
    drawn = []
    monkeypatch.setattr(explorers.plotting, "mask_grid", lambda m, *a, **k: drawn.append(m))
    explorers.masks(src_len=4, tgt_len=3, src_pad=1, tgt_pad=1)
    assert torch.equal(drawn[2], decoder_mask(torch.tensor([[4, 4, 0]]), 0))  # the library's


def test_the_attention_explorer_translates_and_turns_bad_input_into_a_message(dates_model):
    e = explorers.attention(dates_model, text="Friday, 5 March 2021")
    assert "2021-03-05" in e.message.value
    for name, value in (
        ("head", 2),
        ("layer", 1),
        ("kind", "encoder"),
        ("text", "el 5 de marzo de 2021"),
    ):
        assert redraws(e, name, value), name
    e.controls["text"].value = "5 марта 2021"  # Cyrillic: not in the vocabulary
    assert "vocabulary" in e.message.value and e.image.layout.display == "none"
    e.controls["text"].value = "5 March 2021"  # recovers
    assert "2021-03-05" in e.message.value and e.image.layout.display is None
    with pytest.raises(TypeError, match="model"):
        explorers.attention("no-such-checkpoint.pt")


def test_the_decoding_explorer_steps_through_greedy_and_beam_search(dates_model):
    model, tok = dates_model
    e = explorers.decoding(dates_model, text="3/5/21", beam_size=3)
    button, images = e.buttons["next token"], set()
    while not button.disabled:
        button.click()
        images.add(bytes(e.image.value))
    src = torch.tensor([tok.encode("3/5/21")])
    greedy = tok.decode(greedy_decode(model, src, 128)[0].tolist())
    beam = tok.decode(beam_search(model, src, 128, 3, 0.6)[0].tolist())
    message = e.message.value.replace("&#x27;", "'")
    assert f"'{greedy}'" in message and f"'{beam}'" in message and len(images) > len(greedy)
    e.buttons["restart"].click()
    assert not button.disabled
    e.controls["text"].value = "5 März 2021 q"  # 'q' is not in the vocabulary
    assert button.disabled and "vocabulary" in e.message.value
    button.click()  # does nothing, raises nothing
