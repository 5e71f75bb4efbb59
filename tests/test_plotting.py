"""Figure structure of transformer_lib.plotting (Agg backend, nothing shown)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_lib import MultiHeadAttention, causal_mask, sinusoidal_table  # noqa: E402
from transformer_lib import plotting  # noqa: E402

TOKENS = ["<s>", "the", "cat", "sat", "</s>"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def colorbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def test_positional_heatmap():
    table = sinusoidal_table(20, 16)
    fig = plotting.positional_heatmap(table)
    assert len(fig.axes) == 2 and len(colorbars(fig)) == 1
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (20, 16)
    assert torch.allclose(torch.as_tensor(image.data), table)


def test_positional_curves():
    table = sinusoidal_table(50, 16)
    fig = plotting.positional_curves(table, dims=[0, 3, 10])
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3
    assert torch.allclose(torch.as_tensor(lines[1].get_ydata()), table[:, 3])
    with pytest.raises(ValueError, match="dims"):
        plotting.positional_curves(table, dims=[16])


def test_positional_curves_legend_hides_no_curve_and_rows_may_sit_between_positions():
    fine = torch.linspace(0, 12, 241, dtype=torch.float64)  # 20 samples a step
    angles = fine[:, None] / 10000 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    table = torch.stack((angles.sin(), angles.cos()), -1).flatten(1)  # (241, 16)
    fig = plotting.positional_curves(table, dims=[0, 1], positions=fine)
    ax = fig.axes[0]
    x, y = ax.get_lines()[0].get_data()
    torch.testing.assert_close(torch.as_tensor(x), fine)
    torch.testing.assert_close(torch.as_tensor(y), fine.sin().float())  # dim 0 = sin(pos)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # right of the plot
    with pytest.raises(
        ValueError,
        match=r"positions must hold one position per row of "
        r"table \(241\), got shape \(240,\)",
    ):
        plotting.positional_curves(table, dims=[0], positions=fine[1:])


def test_positional_similarity_is_the_dot_product():
    table = sinusoidal_table(40, 16)
    fig = plotting.positional_similarity(table, 10)
    x, y = fig.axes[0].get_lines()[0].get_data()
    assert list(x) == list(range(-10, 30))
    torch.testing.assert_close(torch.as_tensor(y), table @ table[10])
    with pytest.raises(ValueError, match=r"^position must be at most 39, got 40$"):
        plotting.positional_similarity(table, 40)
    with pytest.raises(TypeError, match=r"^position must be an integer, got True \(bool\)$"):
        plotting.positional_similarity(table, True)


def test_attention_heads_one_layer():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 4)
    _, w = mha(torch.randn(1, 5, 8), need_weights=True)  # (1, 4, 5, 5)
    fig = plotting.attention_heads(w, TOKENS)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 4 and len(colorbars(fig)) == 1
    assert [t.get_text() for t in panels[0].get_yticklabels()] == TOKENS
    assert [t.get_text() for t in panels[2].get_xticklabels()] == TOKENS
    assert panels[1].get_title() == "head 1"
    assert torch.allclose(torch.as_tensor(panels[3].images[0].get_array().data), w[0, 3])


def test_attention_heads_layers_and_cross():
    layers = [torch.rand(1, 2, 3, 5).softmax(-1) for _ in range(3)]  # 3 layers, 2 heads
    fig = plotting.attention_heads(layers, TOKENS[:3], TOKENS, row_labels=["l0", "l1", "l2"])
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 6 and len(colorbars(fig)) == 1
    assert panels[2].get_ylabel() == "l1"
    assert [t.get_text() for t in panels[4].get_xticklabels()] == TOKENS
    with pytest.raises(ValueError, match="key tokens"):
        plotting.attention_heads(layers, TOKENS[:3], TOKENS[:4])


def test_attention_heads_tick_labels_stay_legible_on_long_sequences():
    tokens = [f"t{i}" for i in range(40)]
    w = torch.rand(2, 40, 40).softmax(-1)  # (H, T, T)
    fig = plotting.attention_heads(w, tokens, cell=0.05)  # asks for too little
    labels = fig.axes[0].get_yticklabels()
    assert [t.get_text() for t in labels] == tokens  # every token named
    assert min(t.get_fontsize() for t in labels) >= plotting.MIN_TICK_POINTS
    fig.canvas.draw()
    heights = [t.get_window_extent().height for t in labels]  # pixels at fig.dpi
    assert min(heights) >= plotting.MIN_TICK_POINTS * fig.dpi / 72 * 0.8
    default = plotting.attention_heads(w[:, :5, :5], tokens[:5])  # short: unchanged
    assert default.axes[0].get_yticklabels()[0].get_fontsize() == 10.0


def test_mask_grid():
    mask = causal_mask(4)  # (1, 1, 4, 4)
    fig = plotting.mask_grid(mask, TOKENS[:4])
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS[:4]
    assert torch.equal(torch.as_tensor(ax.images[0].get_array().data), mask[0, 0].float())
    with pytest.raises(TypeError, match="bool"):
        plotting.mask_grid(mask.float())


def test_draw_into_given_axes():
    fig, axes = plt.subplots(1, 2)
    out = plotting.mask_grid(causal_mask(3), ax=axes[1])
    assert out is fig and axes[1].images


def test_attention_heads_colour_scale():
    w = torch.rand(2, 3, 3).softmax(-1) * 0.5  # (H, T, T)
    fig = plotting.attention_heads(w, TOKENS[:3])
    assert fig.axes[0].images[0].get_clim() == (0.0, 1.0)
    fig = plotting.attention_heads(w, TOKENS[:3], vmax=None)
    assert fig.axes[1].images[0].get_clim() == pytest.approx((0.0, w.max().item()))


def test_attention_heads_per_row_scale_wrapped_panels_and_axis_titles():
    w = torch.rand(2, 4, 3, 5).softmax(-1)  # (L, H, T_q, T_k)
    w[:, :, 0] = torch.tensor([1.0, 0, 0, 0, 0])  # a dominant row
    fig = plotting.attention_heads(
        w,
        TOKENS[:3],
        TOKENS,
        row_labels=["l0", "l1"],
        columns=2,
        per_row=True,
        query_label="query",
        key_label="key",
    )
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 8 and panels[0].get_gridspec().get_geometry() == (4, 2)
    assert [ax.get_title() for ax in panels[:3]] == ["l0, head 0", "l0, head 1", "l0, head 2"]
    shown = panels[5].images[0].get_array()  # layer 1, head 1
    torch.testing.assert_close(torch.as_tensor(shown.max(axis=-1)), torch.ones(3))
    torch.testing.assert_close(torch.as_tensor(shown), w[1, 1] / w[1, 1].amax(-1, keepdim=True))
    assert fig.get_supylabel() == "query" and fig.get_supxlabel() == "key"
    assert fig.axes[-1].get_ylabel() == "weight / its row's maximum"  # the colour bar
    width_default = plotting.attention_heads(w, TOKENS[:3], TOKENS).get_size_inches()[0]
    assert fig.get_size_inches()[0] < width_default  # 2 columns, not 4
    with pytest.raises(ValueError, match=r"^columns must be at least 1, got 0$"):
        plotting.attention_heads(w, TOKENS[:3], TOKENS, columns=0)
    with pytest.raises(TypeError, match=r"^columns must be an integer, got 2.0 \(float\)$"):
        plotting.attention_heads(w, TOKENS[:3], TOKENS, columns=2.0)
