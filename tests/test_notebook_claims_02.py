"""The numbers that the prose of notebook 02 states about its figures, computed from the
library: the heatmap's stripes, the fast pair's wavelength, the two rotating pairs; and the
lesson's order (no attention module before notebook 03 teaches it).

When the library changes, these fail before the prose silently goes wrong."""

import math

import torch

from transformer_lib import sinusoidal_table

from notebook_cells import cells, source

NAME = "02_positional_encoding.ipynb"


def prose() -> str:
    """The markdown of the notebook, every run of white space one space."""
    return " ".join(
        " ".join(source(c) for c in cells(NAME) if c["cell_type"] == "markdown").split()
    )


def test_heatmap_stripes_are_the_slow_dimensions_nearly_constant_over_100_positions():
    slow = sinusoidal_table(100, 64, dtype=torch.float64)[:, 40:]  # dims 40..63
    largest_angle = 99 / 10000 ** (40 / 64)
    assert f"{largest_angle:.2f}" == "0.31"
    assert f"{slow[:, 0::2].min():.2f}" == "0.00" and f"{slow[:, 0::2].max():.2f}" == "0.31"
    assert f"{slow[:, 1::2].min():.2f}" == "0.95"
    wider = sinusoidal_table(100, 64, dtype=torch.float64)[:, 38:]  # one pair earlier
    assert wider[:, 0::2].max() > 0.31  # 40 is where it starts
    text = prose()
    assert (
        "From dimension 40 on, the angle $pos / 10000^{2i/d_\\text{model}}$ is at most 0.31" in text
    )
    assert "stays between 0 and 0.31" in text and "stays above 0.95" in text


def test_fast_pair_turns_every_two_pi_positions():
    assert f"{2 * math.pi:.1f}" == "6.3"
    assert "turns once every $2\\pi \\approx 6.3$ positions" in prose()


def test_rotation_figure_angles_and_turns():
    omega = {i: 1 / 10000 ** (2 * i / 64) for i in (1, 4)}
    assert f"{omega[1]:.2f}" == "0.75" and f"{omega[4]:.2f}" == "0.32"
    assert f"{2 * math.pi / omega[1]:.1f}" == "8.4" and round(2 * math.pi / omega[4]) == 20
    text = prose()
    assert "0.75 rad for pair 1 and 0.32 rad for pair 4" in text
    assert "pair 1 goes round once in about 8.4 positions and pair 4 in about 20" in text


def test_order_is_shown_to_matter_without_the_attention_module_of_notebook_03():
    code = "\n".join(source(c) for c in cells(NAME) if c["cell_type"] == "code")
    assert "MultiHeadAttention" not in code
    assert "torch.softmax(x @ x.transpose(-2, -1), dim=-1)" in code
    assert "$\\operatorname{softmax}(XX^\\top)\\,X$" in prose()


def test_exercises_say_how_they_work_and_no_prose_about_the_output_comparison():
    posed = next(source(c) for c in cells(NAME) if source(c).startswith("## Exercises"))
    assert "Each exercise is stated first" in posed and "not yet" in posed
    assert "output comparison" not in prose() and "compared when" not in prose()
