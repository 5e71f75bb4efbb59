"""Exercise checkers of notebooks 01-03 (03: scaled dot-product attention; notebook 04's are in
test_exercises_04 and test_exercises_assembly_04_05): correct answers pass, classic mistakes get the
right diagnosis."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lib import sinusoidal_table
from transformer_lib.exercises import ex01_embedding as ex01
from transformer_lib.exercises import ex02_positional as ex02
from transformer_lib.exercises import ex03_attention as ex03


def failed_with(feedback, *words):
    text = str(feedback)
    return (not feedback.passed) and all(w in text for w in words)


def stub(*args, **kwargs):
    raise NotImplementedError


# --- 01 embedding ---------------------------------------------------------------------
def test_text_to_ids_correct_and_wrong():
    assert ex01.check_text_to_ids(ex01.reference_encode)

    def no_markers(s, vocab, n):
        ids = [vocab.get(w, 3) for w in s.split()]
        return torch.tensor(ids + [0] * (n - len(ids)))

    def left_pad(s, vocab, n):
        ids = ex01.reference_encode(s, vocab, n)
        k = int((ids != 0).sum())
        return torch.cat((ids[k:], ids[:k]))

    def drops_unknown(s, vocab, n):
        words = " ".join(w for w in s.split() if w in vocab)
        return ex01.reference_encode(words, vocab, n)

    assert failed_with(ex01.check_text_to_ids(no_markers), "<s>")
    assert failed_with(ex01.check_text_to_ids(left_pad), "pad on the right")
    assert failed_with(ex01.check_text_to_ids(drops_unknown), "<unk>")
    assert failed_with(ex01.check_text_to_ids(stub), "not implemented")


def grad_by_hand(ids, grad_out, V):
    one_hot = F.one_hot(ids, V).to(grad_out.dtype).reshape(-1, V)  # (B·L, V)
    return one_hot.T @ grad_out.reshape(-1, grad_out.shape[-1])  # (V, D)


def grad_by_assignment(ids, grad_out, V):
    grad = torch.zeros(V, grad_out.shape[-1], dtype=grad_out.dtype)
    grad[ids.reshape(-1)] = grad_out.reshape(-1, grad_out.shape[-1])  # repeats: one kept
    return grad


def grad_by_autograd(ids, grad_out, V):
    emb = nn.Embedding(V, grad_out.shape[-1]).to(grad_out.dtype)
    emb(ids).backward(grad_out)
    return emb.weight.grad


def grad_by_autograd_grad(ids, grad_out, V):
    weight = torch.zeros(V, grad_out.shape[-1], dtype=grad_out.dtype, requires_grad=True)
    rows = F.one_hot(ids, V).to(grad_out.dtype) @ weight  # (B, L, D)
    return torch.autograd.grad((rows * grad_out).sum(), weight)[0]


def test_embedding_grad_right_answers_pass():
    fb = ex01.check_embedding_grad(grad_by_hand)
    assert fb and "never occur" in str(fb) and "sums of both positions" in str(fb)
    assert ex01.check_embedding_grad(
        lambda ids, g, V: torch.zeros(V, g.shape[-1], dtype=g.dtype).index_add_(
            0, ids.flatten(), g.flatten(0, 1)
        )
    )


@pytest.mark.parametrize(
    "answer, words",
    [
        (stub, ("not implemented",)),
        (
            lambda ids, g, V: F.one_hot(ids, V).flatten(0, 1).T @ g.flatten(0, 1),
            ("raised RuntimeError",),
        ),
        (grad_by_assignment, ("repeated tokens", "SUM")),
        (lambda ids, g, V: grad_by_hand(ids, g, V).T, ("transposed", "one_hot^T @ grad_out")),
        (
            lambda ids, g, V: F.one_hot(ids, V).to(g.dtype).transpose(1, 2) @ g,
            ("kept the batch dimension",),
        ),
        (lambda ids, g, V: grad_by_hand(ids, g.float(), V), ("dtype (torch.float64)",)),
        (lambda ids, g, V: grad_by_hand(ids, g, V)[:, :-1], ("shape (11, 5), expected (11, 6)",)),
        (lambda ids, g, V: 2 * grad_by_hand(ids, g, V), ("wrong values",)),
        (
            grad_by_autograd,
            ("values match", "without autograd or nn.Embedding", "calls the library's `Embedding`"),
        ),
        (grad_by_autograd_grad, ("calls the library's `grad`",)),
        (nn.Embedding, ("is the library's `Embedding` itself",)),
    ],
    ids=[
        "stub",
        "integer one-hot",
        "assignment",
        "transposed",
        "batch kept",
        "float32",
        "shape",
        "values",
        "autograd",
        "autograd.grad",
        "nn.Embedding",
    ],
)
def test_embedding_grad_names_each_mistake(answer, words):
    assert failed_with(ex01.check_embedding_grad(answer), *words)


def make_embedding(scale="sqrt", padding=True, zero_pad=True, bad_attr=False, std="right"):
    class Emb(nn.Module):
        def __init__(self, vocab, d_model, pad_id):
            super().__init__()
            self.lookup = nn.Embedding(vocab, d_model, padding_idx=pad_id if padding else None)
            if std != "default":  # nn.Embedding's own init is N(0, 1)
                nn.init.normal_(
                    self.lookup.weight, std={"right": d_model**-0.5, "1/d": 1 / d_model}[std]
                )
                if zero_pad:
                    with torch.no_grad():
                        self.lookup.weight[pad_id].zero_()
            elif not zero_pad:
                nn.init.normal_(self.lookup.weight)
            self.d_model = d_model

        def forward(self, ids):
            d = self.embedding_dim if bad_attr else self.d_model
            factor = {"sqrt": math.sqrt(d), "none": 1.0, "d": d, "div": 1 / math.sqrt(d)}[scale]
            return self.lookup(ids) * factor

    return Emb


def test_scaled_embedding():
    assert ex01.check_scaled_embedding(make_embedding())
    assert failed_with(
        ex01.check_scaled_embedding(make_embedding(scale="none")), "forgot the sqrt(d_model) scale"
    )
    assert failed_with(ex01.check_scaled_embedding(make_embedding(scale="d")), "by d_model instead")
    assert failed_with(ex01.check_scaled_embedding(make_embedding(scale="div")), "divided")
    assert failed_with(ex01.check_scaled_embedding(make_embedding(padding=False)), "padding_idx")
    assert failed_with(
        ex01.check_scaled_embedding(make_embedding(zero_pad=False)), "<pad> vector is not zero"
    )
    assert failed_with(
        ex01.check_scaled_embedding(make_embedding(bad_attr=True)),
        "AttributeError",
        "before it is assigned",
    )


def test_scaled_embedding_initialisation():
    fb = ex01.check_scaled_embedding(make_embedding())
    assert "N(0, 1/d_model)" in str(fb)
    assert failed_with(
        ex01.check_scaled_embedding(make_embedding(std="default")),
        "expected about 1/sqrt(d_model) = 0.125",
        "PyTorch's default N(0, 1)",
    )
    fb = ex01.check_scaled_embedding(make_embedding(std="1/d"))
    assert failed_with(fb, "nn.init.normal_") and "default" not in str(fb)


def test_scaled_embedding_library_module_is_refused():
    from transformer_lib import TokenEmbedding

    fb = ex01.check_scaled_embedding(TokenEmbedding)  # right values, not the learner's own
    assert failed_with(fb, "values match", "not the library's `TokenEmbedding`")


@pytest.mark.parametrize(
    "checker, answer",
    [
        (ex01.check_text_to_ids, ex01.reference_encode),
        (ex01.check_embedding_grad, grad_by_hand),
        (ex01.check_embedding_grad, grad_by_autograd),
        (ex01.check_scaled_embedding, make_embedding()),
        (ex01.check_scaled_embedding, stub),
    ],
)
def test_embedding_checkers_leave_global_rng_alone(checker, answer):
    state = torch.get_rng_state()
    checker(answer)
    assert torch.equal(state, torch.get_rng_state())


# --- 02 positional ----------------------------------------------------------------------
def pow_table(max_len, d_model):
    pos = torch.arange(max_len).unsqueeze(1)
    i = torch.arange(0, d_model, 2)
    angles = pos / torch.pow(10000.0, i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


def test_sinusoidal_table_correct():
    assert ex02.check_sinusoidal_table(pow_table)
    assert failed_with(
        ex02.check_sinusoidal_table(lambda n, d: sinusoidal_table(n, d)),
        "without calling `sinusoidal_table`",
        "your code calls",
    )


@pytest.mark.parametrize(
    "key,words",
    [(0, "frequencies inverted"), (1, "concatenated"), (2, "swapped"), (3, "i/d_model")],
)
def test_sinusoidal_table_wrong(key, words):
    def wrong(n, d):
        return list(ex02.wrong_tables(n, d).values())[key].float()

    assert failed_with(ex02.check_sinusoidal_table(wrong), words)


def test_sinusoidal_table_inverted_hand_written():
    def inverted(max_len, d_model):
        pos = torch.arange(max_len).unsqueeze(1)
        angles = pos * torch.pow(10000.0, torch.arange(0, d_model, 2) / d_model)
        return torch.stack((angles.sin(), angles.cos()), -1).flatten(1)

    fb = ex02.check_sinusoidal_table(inverted)
    assert failed_with(fb, "frequencies inverted: you multiplied by 10000^(2i/d) instead")
    assert failed_with(ex02.check_sinusoidal_table(lambda n, d: pow_table(n, d).T), "transposed")


def make_pe(store="buffer", slice_=True, dropout=True):
    class PE(nn.Module):
        def __init__(self, d_model, max_len, p):
            super().__init__()
            table = sinusoidal_table(max_len, d_model)
            if store == "buffer":
                self.register_buffer("pe", table)
            elif store == "param":
                self.pe = nn.Parameter(table)
            else:
                self.pe = table
            self.drop = nn.Dropout(p) if dropout else nn.Identity()

        def forward(self, x):
            pe = self.pe[: x.shape[1]] if slice_ else self.pe
            return self.drop(x + pe)

    return PE


def test_positional_module():
    assert ex02.check_positional_module(make_pe())
    assert failed_with(
        ex02.check_positional_module(make_pe(store="attr")), "plain attribute", "register_buffer"
    )
    assert failed_with(ex02.check_positional_module(make_pe(store="param")), "nn.Parameter")
    assert failed_with(
        ex02.check_positional_module(make_pe(slice_=False)), "slice the table to the input length"
    )
    assert failed_with(ex02.check_positional_module(make_pe(dropout=False)), "no dropout")


def test_rotation():
    assert ex02.check_rotation(
        lambda k, d: torch.block_diag(
            *[
                torch.tensor(
                    [[math.cos(k * w), math.sin(k * w)], [-math.sin(k * w), math.cos(k * w)]],
                    dtype=torch.float64,
                )
                for w in (10000 ** (-i / d) for i in range(0, d, 2))
            ]
        )
    )
    assert failed_with(ex02.check_rotation(ex02.reference_rotation), "`reference_rotation`")
    assert failed_with(
        ex02.check_rotation(lambda k, d: ex02.reference_rotation(k, d).T), "wrong way"
    )
    assert failed_with(
        ex02.check_rotation(lambda k, d: ex02.reference_rotation(k, d, invert=True)),
        "frequencies inverted",
    )
    # the property the checker relies on, independently of it
    pe = sinusoidal_table(30, 8, dtype=torch.float64)
    M = ex02.reference_rotation(4, 8)
    torch.testing.assert_close(pe[10:20] @ M.T, pe[14:24])


# --- 03 attention -------------------------------------------------------------------------
def make_attention(scale="sqrt", dim=-1, mask_mode="ok", fill="finfo", zero_blocked=True):
    def attn(q, k, v, mask=None):
        d_k = q.shape[-1]
        s = q @ k.transpose(-2, -1)
        s = s / {"sqrt": math.sqrt(d_k), "none": 1.0, "d": d_k}[scale]
        m = (
            None
            if mask is None or mask_mode == "ignore"
            else (~mask if mask_mode == "inverted" else mask)
        )
        if m is not None:
            s = s.masked_fill(~m, float("-inf") if fill == "-inf" else torch.finfo(s.dtype).min)
        w = s.softmax(dim=dim)
        if m is not None and zero_blocked:
            w = w.masked_fill(~m, 0.0)
        return w @ v, w

    return attn


@pytest.mark.parametrize(
    "kwargs,words",
    [
        (dict(scale="none"), "forgot the 1/sqrt(d_k) scale"),
        (dict(scale="d"), "instead of sqrt(d_k)"),
        (dict(dim=-2), "wrong dimension"),
        (dict(mask_mode="inverted"), "mask convention inverted"),
        (dict(mask_mode="ignore"), "mask is ignored"),
    ],
)
def test_scaled_dot_product_wrong(kwargs, words):
    assert failed_with(ex03.check_scaled_dot_product(make_attention(**kwargs)), words)


@pytest.mark.parametrize(
    "kwargs,words",
    [
        (dict(fill="-inf", zero_blocked=False), "NaN on the fully masked row"),
        (dict(zero_blocked=False), "uniform weights on the fully masked row"),
    ],
)
def test_scaled_dot_product_fully_masked_row(kwargs, words):
    fb = ex03.check_scaled_dot_product(make_attention(**kwargs))
    assert failed_with(fb, words, "torch.finfo")
    assert "causal mask: shape" in str(fb)  # the rows that keep a key were right


def test_scaled_dot_product_correct():
    assert ex03.check_scaled_dot_product(make_attention())
    assert failed_with(ex03.check_scaled_dot_product(stub), "not implemented")
