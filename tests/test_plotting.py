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


def test_positional_similarity_is_the_dot_product():
    table = sinusoidal_table(40, 16)
    fig = plotting.positional_similarity(table, 10)
    x, y = fig.axes[0].get_lines()[0].get_data()
    assert list(x) == list(range(-10, 30))
    torch.testing.assert_close(torch.as_tensor(y), table @ table[10])
    with pytest.raises(ValueError, match="position must be an int in \\[0, 40\\)"):
        plotting.positional_similarity(table, 40)


def test_attention_heads_one_layer():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 4)
    _, w = mha(torch.randn(1, 5, 8), need_weights=True)                      # (1, 4, 5, 5)
    fig = plotting.attention_heads(w, TOKENS)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 4 and len(colorbars(fig)) == 1
    assert [t.get_text() for t in panels[0].get_yticklabels()] == TOKENS
    assert [t.get_text() for t in panels[2].get_xticklabels()] == TOKENS
    assert panels[1].get_title() == "head 1"
    assert torch.allclose(torch.as_tensor(panels[3].images[0].get_array().data), w[0, 3])


def test_attention_heads_layers_and_cross():
    layers = [torch.rand(1, 2, 3, 5).softmax(-1) for _ in range(3)]          # 3 layers, 2 heads
    fig = plotting.attention_heads(layers, TOKENS[:3], TOKENS, row_labels=["l0", "l1", "l2"])
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 6 and len(colorbars(fig)) == 1
    assert panels[2].get_ylabel() == "l1"
    assert [t.get_text() for t in panels[4].get_xticklabels()] == TOKENS
    with pytest.raises(ValueError, match="key tokens"):
        plotting.attention_heads(layers, TOKENS[:3], TOKENS[:4])


def test_mask_grid():
    mask = causal_mask(4)                                                    # (1, 1, 4, 4)
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
    w = torch.rand(2, 3, 3).softmax(-1) * 0.5                                # (H, T, T)
    fig = plotting.attention_heads(w, TOKENS[:3])
    assert fig.axes[0].images[0].get_clim() == (0.0, 1.0)
    fig = plotting.attention_heads(w, TOKENS[:3], vmax=None)
    assert fig.axes[1].images[0].get_clim() == pytest.approx((0.0, w.max().item()))


def test_attention_heads_per_row_scale_wrapped_panels_and_axis_titles():
    w = torch.rand(2, 4, 3, 5).softmax(-1)                                   # (L, H, T_q, T_k)
    w[:, :, 0] = torch.tensor([1.0, 0, 0, 0, 0])                             # a dominant row
    fig = plotting.attention_heads(w, TOKENS[:3], TOKENS, row_labels=["l0", "l1"], columns=2,
                                   per_row=True, query_label="query", key_label="key")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 8 and panels[0].get_gridspec().get_geometry() == (4, 2)
    assert [ax.get_title() for ax in panels[:3]] == ["l0, head 0", "l0, head 1", "l0, head 2"]
    shown = panels[5].images[0].get_array()                                  # layer 1, head 1
    torch.testing.assert_close(torch.as_tensor(shown.max(axis=-1)), torch.ones(3))
    torch.testing.assert_close(torch.as_tensor(shown), w[1, 1] / w[1, 1].amax(-1, keepdim=True))
    assert fig.get_supylabel() == "query" and fig.get_supxlabel() == "key"
    assert fig.axes[-1].get_ylabel() == "weight / its row's maximum"         # the colour bar
    width_default = plotting.attention_heads(w, TOKENS[:3], TOKENS).get_size_inches()[0]
    assert fig.get_size_inches()[0] < width_default                          # 2 columns, not 4
    with pytest.raises(ValueError, match="columns must be a positive int"):
        plotting.attention_heads(w, TOKENS[:3], TOKENS, columns=0)
