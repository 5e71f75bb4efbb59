"""Each argument is checked once on its way through the model: the stack checks it, the
layers it calls do not check it again; a layer called on its own still checks its inputs."""

import importlib
import threading

import pytest
import torch

from transformer_lib.attention import MultiHeadAttention, attention, fused_attention
from transformer_lib.checks import checked_inputs, inputs_checked
from transformer_lib.config import TransformerConfig
from transformer_lib.encoder import EncoderLayer
from transformer_lib.masks import padding_mask
from transformer_lib.model import Transformer

B, S, T = 2, 7, 5
MODULES = [
    importlib.import_module(f"transformer_lib.{name}")  # not the package's functions
    for name in ("checks", "attention", "encoder", "decoder", "model", "positional")
]


def tiny(N):
    torch.manual_seed(0)
    return Transformer(TransformerConfig.tiny(64, N=N)).eval()


@pytest.fixture
def counted(monkeypatch):
    """Count the calls of check_mask and check_sequence from every module that uses them,
    and the calls of check_attention_inputs that check (not those skipped as checked)."""
    calls = {"check_mask": 0, "check_sequence": 0, "check_attention_inputs": 0}

    def counting(name, real):
        def check(*args, **kwargs):
            if name != "check_attention_inputs" or not inputs_checked():
                calls[name] += 1
            return real(*args, **kwargs)

        return check

    for name in calls:
        real = getattr(MODULES[0], name)
        for module in MODULES:
            if getattr(module, name, None) is real:
                monkeypatch.setattr(module, name, counting(name, real))
    return calls


def ids(rows, length):
    return torch.randint(4, 64, (rows, length))


@pytest.mark.parametrize("N", [1, 3])
def test_a_forward_checks_each_mask_once_whatever_the_depth(counted, N):
    net = tiny(N)
    src, tgt = ids(B, S), ids(B, T)
    net(src, tgt, src_mask=padding_mask(src, 0), tgt_mask=padding_mask(tgt, 0))
    # src_mask and tgt_mask by the Transformer; the embedded src and tgt by the positions
    assert counted == {"check_mask": 2, "check_sequence": 2, "check_attention_inputs": 0}


@pytest.mark.parametrize("N", [1, 3])
def test_decode_with_a_cache_checks_each_argument_once(counted, N):
    net = tiny(N)
    src = ids(B, S)
    memory, cache = net.encode(src), net.new_cache()
    counted.update(dict.fromkeys(counted, 0))
    net.decode(ids(B, 1), memory, src=src, cache=cache)
    # src_mask and tgt_mask; memory, and the embedded tgt by the positions
    assert counted == {"check_mask": 2, "check_sequence": 2, "check_attention_inputs": 0}


@pytest.mark.parametrize("N", [1, 3])
def test_a_decoder_called_alone_checks_its_inputs_once(counted, N):
    stack = tiny(N).decoder
    stack(
        torch.randn(B, T, 32),
        torch.randn(B, S, 32),
        memory_mask=torch.ones(B, 1, 1, S, dtype=torch.bool),
    )
    assert counted == {"check_mask": 2, "check_sequence": 2, "check_attention_inputs": 0}


@pytest.mark.parametrize("N", [1, 3])
def test_an_encoder_called_alone_checks_its_inputs_once(counted, N):
    stack = tiny(N).encoder
    stack(torch.randn(B, S, 32), torch.ones(B, 1, 1, S, dtype=torch.bool))
    assert counted == {"check_mask": 1, "check_sequence": 1, "check_attention_inputs": 0}
    with pytest.raises(
        ValueError,
        match=r"^mask of shape \(2, 1, 1, 6\) does not broadcast to "
        r"\(B, H, T_q, T_k\) = \(2, 4, 7, 7\)$",
    ):
        stack(torch.randn(B, S, 32), torch.ones(B, 1, 1, S - 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^x must have shape \(B, L, 32\), got \(2, 7, 16\)$"):
        stack(torch.randn(B, S, 16))


def test_a_layer_called_alone_checks_its_inputs(counted):
    layer = EncoderLayer(TransformerConfig.tiny(64))
    layer(torch.randn(B, S, 32), torch.ones(B, 1, 1, S, dtype=torch.bool))
    assert counted == {"check_mask": 1, "check_sequence": 1, "check_attention_inputs": 0}
    with pytest.raises(
        ValueError,
        match=r"^mask of shape \(2, 1, 1, 6\) does not broadcast to "
        r"\(B, H, T_q, T_k\) = \(2, 4, 7, 7\)$",
    ):
        layer(torch.randn(B, S, 32), torch.ones(B, 1, 1, S - 1, dtype=torch.bool))


def test_a_layer_taken_out_of_the_model_still_checks():
    layer = tiny(2).encoder.layers[0]
    with pytest.raises(
        TypeError,
        match=r"^mask must have dtype torch.bool \(True = may "
        r"attend\), got torch.float32$",
    ):
        layer(torch.randn(B, S, 32), torch.ones(B, 1, 1, S))


def test_the_functions_check_when_called_alone():
    q = torch.randn(B, 4, T, 8)
    with pytest.raises(ValueError, match=r"^q and k must have the same d_k"):
        attention(q, torch.randn(B, 4, S, 4), torch.randn(B, 4, S, 8))
    with pytest.raises(ValueError, match=r"^q and k must have the same d_k"):
        fused_attention(q, torch.randn(B, 4, S, 4), torch.randn(B, 4, S, 8))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda net, memory: net.decode(ids(B, T), memory[..., :16]),
            ValueError,
            r"^memory must have shape \(B, L, 32\), got \(2, 7, 16\)$",
        ),
        (
            lambda net, memory: net.decode(ids(B, T), memory.long()),
            TypeError,
            r"^memory must be a floating-point tensor, got dtype torch.int64$",
        ),
        (
            lambda net, memory: net.decoder(
                torch.randn(B, T, 32),
                memory,
                memory_mask=torch.ones(B, 1, T, S + 1, dtype=torch.bool),
            ),
            ValueError,
            r"^memory_mask of shape \(2, 1, 5, 8\) does not broadcast to \(B, H, T_q, "
            r"T_k\) = \(2, 4, 5, 7\)$",
        ),
        (
            lambda net, memory: net.decoder(
                torch.randn(B, T, 32), memory, tgt_mask=torch.ones(T, T)
            ),
            TypeError,
            r"^tgt_mask must have dtype torch.bool \(True = may attend\), got torch.float32$",
        ),
    ],
)
def test_what_the_layers_no_longer_check_the_stack_does(call, error, match):
    net = tiny(2)
    memory = net.encode(ids(B, S))
    with pytest.raises(error, match=match):
        call(net, memory)


def test_inside_a_checked_block_a_layer_computes_the_same():
    mha = MultiHeadAttention(32, 4)
    x, mask = torch.randn(B, T, 32), torch.ones(B, 1, 1, T, dtype=torch.bool)
    with checked_inputs():
        assert inputs_checked()
        out, _ = mha(x, mask=mask)
    assert not inputs_checked()
    torch.testing.assert_close(out, mha(x, mask=mask)[0])


def test_the_checked_block_is_per_thread_and_ends_on_an_error():
    seen = []
    with checked_inputs():
        worker = threading.Thread(target=lambda: seen.append(inputs_checked()))
        worker.start()
        worker.join()
    assert seen == [False]
    with pytest.raises(RuntimeError, match="^inside$"):
        with checked_inputs():
            raise RuntimeError("inside")
    assert not inputs_checked()
