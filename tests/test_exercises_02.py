"""Notebook 02's exercise checkers: a right answer passes; the typical wrong answers get "not
yet" with the mistake named; the library's own table and module are refused where the learner
must do without them."""

import torch
from torch import nn

from transformer_lib.exercises import ex02_positional as ex02
from transformer_lib.positional import PositionalEncoding, sinusoidal_table

LEARNED = ex02.CHECKS["learned_positions"][1]()


def not_yet(feedback, *words):
    text = str(feedback)
    assert not feedback and "not yet" in text, text
    for word in words:
        assert word in text, text


def test_similarity_reference_is_the_tables_dot_product_at_every_position():
    table = sinusoidal_table(120, 32, dtype=torch.float64)
    k = torch.arange(-20, 30)
    for p in (20, 55, 90):
        torch.testing.assert_close(table[p + k] @ table[p], ex02.similarity_reference(k, 32))


def test_similarity_passes_the_formula_and_names_typical_mistakes():
    assert ex02.check_similarity(ex02.similarity_reference)
    not_yet(ex02.check_similarity(lambda k, d: 2 * ex02.similarity_reference(k, d)), "twice")
    inverted = lambda k, d: torch.cos(k[:, None] * 10000 ** (torch.arange(0, d, 2) / d)).sum(-1)
    not_yet(ex02.check_similarity(inverted), "frequencies inverted")
    not_yet(ex02.check_similarity(lambda k, d: ex02.similarity_reference(k, d)[:, None]), "shape")


def test_similarity_refuses_the_library_table():
    def from_table(k, d_model):
        table = sinusoidal_table(200, d_model, dtype=torch.float64)
        return table[100 + k] @ table[100]

    not_yet(ex02.check_similarity(from_table), "without the table")


def test_rotation_passes_block_matrices_and_names_typical_mistakes():
    right = ex02.CHECKS["rotation"][1]()
    assert ex02.check_rotation(right)
    assert ex02.check_rotation(lambda k, d: right(k, d).float())
    not_yet(ex02.check_rotation(lambda k, d: right(k, d).T), "M_(-k)")
    not_yet(ex02.check_rotation(lambda k, d: right(1, d)), "k is missing")
    not_yet(ex02.check_rotation(lambda k, d: right(k, d)[:2, :2]), "one 2x2 block per pair")


def test_rotation_refuses_the_checkers_reference():
    not_yet(ex02.check_rotation(ex02.reference_rotation), "reference_rotation")


def test_learned_positions_pass_and_match_the_librarys_learned_module():
    assert ex02.check_learned_positions(LEARNED)
    torch.manual_seed(0)
    ours, lib = LEARNED(8, 20, 0.0), PositionalEncoding(8, 20, 0.0, learned=True)
    lib.pe.data.copy_(ours.pe.data)
    x = torch.randn(3, 11, 8)
    torch.testing.assert_close(ours(x), lib(x))


def test_learned_positions_name_a_buffer_a_missing_slice_and_a_silent_max_len():
    class Buffer(nn.Module):
        def __init__(self, d_model, max_len, dropout):
            super().__init__()
            self.register_buffer("pe", torch.randn(max_len, d_model) * d_model**-0.5)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(x + self.pe[: x.shape[1]])

    class NoSlice(LEARNED):
        def forward(self, x):
            return self.dropout(x + self.pe)

    class Silent(LEARNED):
        def forward(self, x):
            return self.dropout(x + self.pe[: x.shape[1]])

    class NoDropout(LEARNED):
        def forward(self, x):
            return x + self.pe[: x.shape[1]]

    not_yet(ex02.check_learned_positions(Buffer), "buffer is never trained")
    not_yet(ex02.check_learned_positions(NoSlice), "not sliced")
    not_yet(ex02.check_learned_positions(Silent), "ValueError naming max_len")
    not_yet(ex02.check_learned_positions(NoDropout), "no dropout")


def test_learned_positions_name_the_initialisation():
    class StandardNormal(LEARNED):
        def __init__(self, d_model, max_len=512, dropout=0.1):
            super().__init__(d_model, max_len, dropout)
            nn.init.normal_(self.pe)

    not_yet(ex02.check_learned_positions(StandardNormal), "N(0, 1)")


def test_learned_positions_refuse_the_library_module():
    learned = lambda d, m, p: PositionalEncoding(d, m, p, learned=True)
    not_yet(ex02.check_learned_positions(learned), "PositionalEncoding")
