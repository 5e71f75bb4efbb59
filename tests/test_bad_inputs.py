"""Bad input at each public entry point: one TypeError or ValueError whose message names the
argument and what was expected (never an error from deep inside PyTorch), one case per kind
of argument; and the command lines' bad flags: a usage line naming the flag, before any
work starts."""

import datetime as dt
import io
import re
import sys

import pytest
import torch

from transformer_lib import corpus, dates, fast, masks, positional
from transformer_lib import export as export_cli
from transformer_lib import train as train_cli
from transformer_lib import translate as translate_cli
from transformer_lib.attention import MultiHeadAttention, attention, fused_attention
from transformer_lib.batching import encode_pairs, pad_rows, token_batches
from transformer_lib.checkpoint import export_for_inference, save_checkpoint, shipped_checkpoint
from transformer_lib.config import TransformerConfig
from transformer_lib.decoder import KVCache
from transformer_lib.embedding import TokenEmbedding
from transformer_lib.model import Transformer
from transformer_lib.search import beam_search, greedy_decode, translate
from transformer_lib.tokenizers import BPETokenizer, CharTokenizer, tokenizer_from_dict
from transformer_lib.training import LabelSmoothingLoss, TrainConfig, Trainer, noam_lr

from test_cli import usage_error

C = TransformerConfig.tiny(20, P_drop=0.0, max_len=16)  # d_model 32, h 4, N 2
torch.manual_seed(0)
MODEL = Transformer(C).eval()
SRC, TGT = torch.randint(3, 20, (2, 5)), torch.randint(3, 20, (2, 4))
MEMORY = MODEL.encode(SRC)
MHA = MultiHeadAttention(32, 4)
X = torch.randn(2, 3, 32)
Q = K = V = torch.randn(2, 4, 3, 8)
TOK = CharTokenizer.train(["abc"])
long = torch.long


def cache_of_batch(n):
    cache = MODEL.new_cache()
    MODEL.decode(TGT[:n, :1], MEMORY[:n], cache=cache)
    return cache


CASES = {
    # the model: ids, masks, memory, cache, sizes
    "forward src float": (TypeError, "src.*torch.long", lambda: MODEL(SRC.float(), TGT)),
    "forward src list": (TypeError, "src.*torch.Tensor", lambda: MODEL(SRC.tolist(), TGT)),
    "forward src 1-D": (ValueError, r"src.*\(B, L\)", lambda: MODEL(SRC[0], TGT)),
    "forward src ids": (ValueError, "src.*vocabulary", lambda: MODEL(SRC + 20, TGT)),
    "forward tgt ids": (ValueError, "tgt.*vocabulary", lambda: MODEL(SRC, TGT - 100)),
    "forward batches": (ValueError, "src and tgt", lambda: MODEL(SRC, TGT[:1])),
    "forward too long": (
        ValueError,
        "max_len",
        lambda: MODEL(torch.ones(1, 17, dtype=long), TGT[:1]),
    ),
    "forward float mask": (
        TypeError,
        "src_mask.*bool",
        lambda: MODEL(SRC, TGT, src_mask=torch.ones(2, 1, 1, 5)),
    ),
    "forward mask shape": (
        ValueError,
        "src_mask.*broadcast",
        lambda: MODEL(SRC, TGT, src_mask=torch.ones(2, 1, 1, 6, dtype=torch.bool)),
    ),
    "forward tgt_mask shape": (
        ValueError,
        "tgt_mask.*broadcast",
        lambda: MODEL(SRC, TGT, tgt_mask=torch.ones(2, 1, 5, 5, dtype=torch.bool)),
    ),
    "encode src_mask": (
        TypeError,
        "src_mask.*bool",
        lambda: MODEL.encode(SRC, torch.ones(2, 1, 1, 5, dtype=long)),
    ),
    "decode memory float64": (
        TypeError,
        "memory.*float64",
        lambda: MODEL.decode(TGT, MEMORY.double()),
    ),
    "decode memory width": (
        ValueError,
        "memory.*shape",
        lambda: MODEL.decode(TGT, MEMORY[..., :16]),
    ),
    "decode memory batch": (ValueError, "memory.*shape", lambda: MODEL.decode(TGT, MEMORY[:1])),
    "decode memory ids": (
        TypeError,
        "memory.*floating",
        lambda: MODEL.decode(TGT, SRC[..., None].expand(2, 5, 32)),
    ),
    "decode cache batch": (
        ValueError,
        "cache.*batch",
        lambda: MODEL.decode(TGT[:, :1], MEMORY, cache=cache_of_batch(1)),
    ),
    "decode cache type": (TypeError, "cache.*KVCache", lambda: MODEL.decode(TGT, MEMORY, cache={})),
    "decode tgt ids": (ValueError, "tgt.*vocabulary", lambda: MODEL.decode(TGT + 20, MEMORY)),
    "model config": (TypeError, "config.*TransformerConfig", lambda: Transformer({"d_model": 512})),
    "cache reorder range": (
        ValueError,
        r"index.*outside \[0, 2\)",
        lambda: cache_of_batch(2).reorder(torch.tensor([0, 2])),
    ),
    "cache reorder dtype": (
        TypeError,
        "index.*long",
        lambda: cache_of_batch(2).reorder(torch.tensor([0.0, 1.0])),
    ),
    "cache layers": (ValueError, "n_layers", lambda: KVCache(0)),
    # attention
    "mha x float64": (TypeError, "x.*float64", lambda: MHA(X.double())),
    "mha x width": (ValueError, r"x.*\(B, L, 32\)", lambda: MHA(X[..., :30])),
    "mha x type": (TypeError, "x.*torch.Tensor", lambda: MHA(X.tolist())),
    "mha memory batch": (ValueError, "memory.*shape", lambda: MHA(X, torch.randn(3, 5, 32))),
    "mha float mask": (TypeError, "mask.*bool", lambda: MHA(X, mask=torch.ones(2, 1, 1, 3))),
    "mha mask shape": (
        ValueError,
        "mask.*broadcast",
        lambda: MHA(X, mask=torch.ones(2, 1, 3, 4, dtype=torch.bool)),
    ),
    "mha heads": (ValueError, "divisible", lambda: MultiHeadAttention(30, 4)),
    "mha h bool": (TypeError, "h must be an integer", lambda: MultiHeadAttention(32, True)),
    "mha dropout": (ValueError, "dropout", lambda: MultiHeadAttention(32, 4, dropout=1.0)),
    "attention q ints": (
        TypeError,
        "q must be a floating-point",
        lambda: attention(Q.long(), K, V),
    ),
    "attention dtypes": (TypeError, "one dtype", lambda: fused_attention(Q, K.double(), V)),
    "attention d_k": (ValueError, "d_k", lambda: attention(Q, K[..., :6], V)),
    "attention T_k": (ValueError, "T_k", lambda: fused_attention(Q, K, V[..., :2, :])),
    "attention float mask": (
        TypeError,
        "mask.*bool",
        lambda: attention(Q, K, V, torch.ones(3, 3).tril()),
    ),
    "fused float mask": (
        TypeError,
        "mask.*bool",
        lambda: fused_attention(Q, K, V, torch.zeros(3, 3)),
    ),
    "attention mask shape": (
        ValueError,
        "mask.*broadcast",
        lambda: attention(Q, K, V, torch.ones(3, 4, dtype=torch.bool)),
    ),
    "attention dropout": (ValueError, "dropout_p", lambda: fused_attention(Q, K, V, dropout_p=1.5)),
    # embeddings, positions, masks
    "embedding ids float": (
        TypeError,
        "ids.*torch.long",
        lambda: TokenEmbedding(10, 8)(torch.zeros(1, 2)),
    ),
    "embedding ids range": (
        ValueError,
        "ids.*vocabulary",
        lambda: TokenEmbedding(10, 8)(torch.tensor([[10]])),
    ),
    "embedding size": (ValueError, "vocab_size", lambda: TokenEmbedding(0, 8)),
    "embedding pad_id": (ValueError, "pad_id", lambda: TokenEmbedding(10, 8, pad_id=10)),
    "positions x width": (
        ValueError,
        "x.*shape",
        lambda: positional.PositionalEncoding(8)(torch.zeros(1, 2, 6)),
    ),
    "positions offset": (
        ValueError,
        "offset",
        lambda: positional.PositionalEncoding(8)(torch.zeros(1, 2, 8), -1),
    ),
    "positions too long": (
        ValueError,
        "max_len=4",
        lambda: positional.PositionalEncoding(8, 4)(torch.zeros(1, 5, 8)),
    ),
    "positions dropout": (
        ValueError,
        "dropout",
        lambda: positional.PositionalEncoding(8, dropout=2.0),
    ),
    "table odd": (ValueError, "d_model.*even", lambda: positional.sinusoidal_table(10, 7)),
    "table layout": (
        ValueError,
        "layout",
        lambda: positional.sinusoidal_table(10, 8, layout="spiral"),
    ),
    "padding_mask ids": (TypeError, "ids", lambda: masks.padding_mask(SRC.float(), 0)),
    "causal length": (ValueError, "length", lambda: masks.causal_mask(-1)),
    "causal length float": (TypeError, "length", lambda: masks.causal_mask(2.5)),
    "to_blocked none": (TypeError, "mask", lambda: masks.to_blocked(None)),
    "to_blocked float": (TypeError, "mask.*bool", lambda: masks.to_blocked(torch.ones(2, 2))),
    # decoding
    "greedy model": (TypeError, "model", lambda: greedy_decode("model", SRC, 5)),
    "greedy src float": (
        TypeError,
        "src.*torch.long",
        lambda: greedy_decode(MODEL, SRC.float(), 5),
    ),
    "greedy src ids": (ValueError, "src.*vocabulary", lambda: greedy_decode(MODEL, SRC + 20, 5)),
    "greedy empty": (ValueError, "src.*at least one", lambda: greedy_decode(MODEL, SRC[:0], 5)),
    "greedy max_len": (ValueError, "max_len", lambda: greedy_decode(MODEL, SRC, 17)),
    "greedy max_len float": (TypeError, "max_len.*integer", lambda: greedy_decode(MODEL, SRC, 2.5)),
    "greedy eos is pad": (ValueError, "eos_id", lambda: greedy_decode(MODEL, SRC, 5, eos_id=0)),
    "beam bos": (ValueError, "bos_id", lambda: beam_search(MODEL, SRC, 5, bos_id=20)),
    "beam size": (ValueError, "beam_size", lambda: beam_search(MODEL, SRC, 5, beam_size=0)),
    "beam penalty": (
        ValueError,
        "length_penalty",
        lambda: beam_search(MODEL, SRC, 5, length_penalty=-1.0),
    ),
    "translate str": (TypeError, "sentences", lambda: translate(MODEL, TOK, "abc")),
    "translate model": (TypeError, "model.*Transformer", lambda: translate("m", TOK, ["abc"])),
    "translate tokenizer": (TypeError, "tokenizer.*str", lambda: translate(MODEL, "abc", ["abc"])),
    "translate beam": (ValueError, "beam", lambda: translate(MODEL, TOK, ["abc"], beam=0)),
    "translate max_len": (
        ValueError,
        "max_len",
        lambda: translate(MODEL, TOK, ["abc"], max_len=99),
    ),
    "translate batch": (
        ValueError,
        "batch_size",
        lambda: translate(MODEL, TOK, ["abc"], batch_size=0),
    ),
    # configurations
    "config heads": (ValueError, "divisible", lambda: C.replace(h=5)),
    "config N": (ValueError, "N must be at least 1", lambda: C.replace(N=0)),
    "config float size": (TypeError, "d_model.*integer", lambda: C.replace(d_model=32.0)),
    "config P_drop": (ValueError, "P_drop", lambda: C.replace(P_drop=1.0)),
    "config positions": (ValueError, "positions", lambda: C.replace(positions="rotary")),
    "config norm_first": (TypeError, "norm_first", lambda: C.replace(norm_first="yes")),
    "config tie": (ValueError, "tie_embeddings", lambda: C.replace(tgt_vocab_size=30)),
    "config pad_id": (ValueError, "pad_id", lambda: C.replace(pad_id=20)),
    "train no data": (ValueError, "task", lambda: TrainConfig()),
    "train two data": (ValueError, "task", lambda: TrainConfig(task="dates", corpus="bible-en-fr")),
    "train task": (ValueError, "task", lambda: TrainConfig(task="poems")),
    "train file": (
        ValueError,
        "train_file",
        lambda: TrainConfig(train_file="no.tsv", valid_file="no.tsv"),
    ),
    "train valid file": (ValueError, "valid_file", lambda: TrainConfig(train_file=__file__)),
    "train steps": (ValueError, "steps", lambda: TrainConfig(task="dates", steps=0)),
    "train lr nan": (
        ValueError,
        "lr_factor.*finite",
        lambda: TrainConfig(task="dates", lr_factor=float("nan")),
    ),
    "train smoothing": (
        ValueError,
        "label_smoothing",
        lambda: TrainConfig(task="dates", label_smoothing=1.0),
    ),
    "train seed": (ValueError, "seed", lambda: TrainConfig(task="dates", seed=-1)),
    "train bf16": (TypeError, "bf16", lambda: TrainConfig(task="dates", bf16="yes")),
    "train preset": (ValueError, "preset", lambda: TrainConfig(task="dates", preset="huge")),
    "train budget": (ValueError, "time_budget", lambda: TrainConfig(task="dates", time_budget=0)),
    "train model": (
        ValueError,
        "model.*divisible",
        lambda: TrainConfig(task="dates", heads=5).model_config(30),
    ),
    # data
    "char texts str": (TypeError, "texts", lambda: CharTokenizer.train("abc")),
    "char texts empty": (TypeError, "texts", lambda: CharTokenizer.train([])),
    "encode text": (TypeError, "text", lambda: TOK.encode(5)),
    "decode ids str": (TypeError, "ids", lambda: TOK.decode("abc")),
    "decode ids range": (ValueError, "ids.*vocabulary", lambda: TOK.decode([99])),
    "id_to_token": (ValueError, "i must be at most", lambda: TOK.id_to_token(99)),
    "bpe vocab": (ValueError, "vocab_size", lambda: BPETokenizer.train(["a b"], vocab_size=3)),
    "tokenizer dict": (ValueError, "d must be", lambda: tokenizer_from_dict({"kind": "wordpiece"})),
    "batches max_tokens": (ValueError, "max_tokens", lambda: token_batches([([4], [5])], 0)),
    "batches too small": (
        ValueError,
        r"max_tokens=2.*examples\[0\]",
        lambda: token_batches([([4, 4, 4], [5])], 2),
    ),
    "batches examples": (TypeError, "examples", lambda: token_batches("abc", 10)),
    "batches example": (
        TypeError,
        r"examples\[1\]",
        lambda: token_batches([([4], [5]), ([4], "x")], 10),
    ),
    "batches negative": (
        ValueError,
        r"examples\[0\].*>= 0",
        lambda: token_batches([([-4], [5])], 10),
    ),
    "batches shuffle": (
        TypeError,
        "shuffle",
        lambda: token_batches([([4], [5])], 10, shuffle="yes"),
    ),
    "encode pairs": (TypeError, "pairs", lambda: encode_pairs("ab", TOK)),
    "encode pair": (TypeError, r"pairs\[0\]", lambda: encode_pairs([("a", 1)], TOK)),
    "pad rows": (ValueError, "rows", lambda: pad_rows([])),
    "dates n_train": (TypeError, "n_train", lambda: dates.make_date_splits(n_train=1.5)),
    "dates n_test": (ValueError, "n_test", lambda: dates.make_date_splits(10, 0, 40000)),
    "dates formats": (
        ValueError,
        "formats",
        lambda: dates.make_date_splits(10, 0, 0, formats=["x"]),
    ),
    "format date": (TypeError, "date", lambda: dates.format_date("2021-03-05", "iso")),
    "format fmt": (ValueError, "fmt", lambda: dates.format_date(dt.date(2021, 3, 5), "nope")),
    "read path": (TypeError, "path", lambda: corpus.read_parallel(5)),
    "write pairs": (
        ValueError,
        r"pairs\[0\].*tabs",
        lambda: corpus.write_parallel("x.tsv", [("a\tb", "c")]),
    ),
    "bible english": (ValueError, "english", lambda: corpus.aligned_verses(english="kjv")),
    # training
    "smoothing epsilon": (ValueError, "epsilon", lambda: LabelSmoothingLoss(1.0)),
    "smoothing logits": (TypeError, "logits", lambda: LabelSmoothingLoss()(TGT, TGT)),
    "smoothing target": (
        TypeError,
        "target",
        lambda: LabelSmoothingLoss()(torch.randn(2, 4, 9), TGT.float()),
    ),
    "noam step": (ValueError, "step must be at least 1", lambda: noam_lr(0, 512)),
    "noam step float": (TypeError, "step must be an integer", lambda: noam_lr(1.5, 512)),
    "noam factor": (ValueError, "factor", lambda: noam_lr(1, 512, factor=0.0)),
    "trainer model": (
        TypeError,
        "model",
        lambda: Trainer("m", TOK, [([4], [5])], [], TrainConfig(task="dates")),
    ),
    "trainer tokenizer": (
        TypeError,
        "tokenizer",
        lambda: Trainer(MODEL, "t", [([4], [5])], [], TrainConfig(task="dates")),
    ),
    "trainer config": (TypeError, "config", lambda: Trainer(MODEL, TOK, [([4], [5])], [], {})),
    "trainer examples": (
        ValueError,
        "train_examples",
        lambda: Trainer(MODEL, TOK, [], [], TrainConfig(task="dates")),
    ),
    "trainer pairs": (
        TypeError,
        "pairs",
        lambda: Trainer(MODEL, TOK, [([4], [5])], "ab", TrainConfig(task="dates")),
    ),
    "save path": (TypeError, "path", lambda: save_checkpoint(None, {})),
    "save state": (TypeError, "state", lambda: save_checkpoint("x.pt", [1])),
    "export dtype": (ValueError, "dtype", lambda: export_for_inference("x.pt", "y.pt", torch.int8)),
    "shipped name": (ValueError, "name", lambda: shipped_checkpoint("wmt14")),
    "accelerate model": (TypeError, "model", lambda: fast.accelerate("model")),
    "accelerate kernels": (TypeError, "kernels", lambda: fast.accelerate(MHA, kernels="yes")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_one_clear_error_naming_the_argument(case):
    error, match, call = CASES[case]
    with pytest.raises(error, match=match):
        call()


def test_a_cache_refused_for_its_batch_size_is_left_as_it_was():
    cache = cache_of_batch(2)
    with pytest.raises(ValueError):
        MODEL.decode(TGT[:1, :1], MEMORY[:1], cache=cache)
    assert cache.batch_size == 2 and cache.length == 1


def test_a_training_step_off_the_cpu_reads_no_tensor_value_for_its_checks():
    """The checks read ids only on CPU tensors (no device sync in a GPU step): on the meta
    device, where any read of a value raises, a forward, loss and backward pass run."""
    model = Transformer(TransformerConfig.tiny(30)).to("meta").train()
    src, tgt = (torch.randint(3, 30, (2, n), device="meta") for n in (5, 4))
    loss = LabelSmoothingLoss(0.1)(model(src, tgt, src_mask=src[:, None, None] != 0), tgt)
    loss.backward()
    assert model.generator.weight.grad.device.type == "meta"


# the command lines ---------------------------------------------------------------------------
@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(Trainer, "fit", lambda self: pytest.fail("trained"))


TRAIN = [  # flags, what the usage line names
    (["--lr-factor", "nan"], "--lr-factor.*finite"),
    (["--max-tokens", "1"], "--max-tokens.*at least"),
    (["--max-len", "1"], "--max-len.*at least 2"),
    (["--seed", "1.5"], "--seed.*int"),
    (["--heads", "5"], "divisible"),
    (["--n-valid", "40000"], "--n-valid"),
    (["--corpus", "bible-en-fr"], "task.*exactly one"),
    (["--preset", "huge"], "--preset.*invalid choice"),
    (["--device", "nope"], "--device nope"),
    (["--threads", "0"], "--threads.*at least 1"),
    (["--name", "a/b.pt"], "--name.*file name"),
    (["--compile", "--compiled-kernels"], "--compiled-kernels.*--compile"),
    (["--resume"], "--resume.*not found"),
]


@pytest.mark.parametrize("flags, match", TRAIN, ids=[" ".join(f) for f, _ in TRAIN])
def test_train_refuses_bad_flags_in_one_usage_line(
    tmp_path, capsys, no_training, tiny_dates, flags, match
):
    line = usage_error(capsys, train_cli.main, [*tiny_dates, *flags, "--out", str(tmp_path / "r")])
    assert re.search(match, line), line


def test_train_refuses_a_train_file_it_cannot_read(tmp_path, capsys, no_training):
    (tmp_path / "bad.tsv").write_text("a\tb\nno tab\n")
    argv = ["--train-file", str(tmp_path / "bad.tsv"), "--valid-file", str(tmp_path / "bad.tsv")]
    line = usage_error(capsys, train_cli.main, [*argv, "--out", str(tmp_path / "r")])
    assert "--train-file" in line and "line 2" in line
    line = usage_error(capsys, train_cli.main, ["--train-file", "none.tsv", "--out", "r"])
    assert "--train-file" in line and "none.tsv" in line


TRANSLATE = [
    (["--beam", "0"], "--beam.*at least 1"),
    (["--length-penalty", "-1"], "--length-penalty"),
    (["--max-len", "999"], "--max-len 999.*max_len"),
    (["--device", "cuda:99"], "--device"),
]


@pytest.mark.parametrize("flags, match", TRANSLATE, ids=[" ".join(f) for f, _ in TRANSLATE])
def test_translate_refuses_bad_flags_in_one_usage_line(capsys, monkeypatch, flags, match):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"5 March 2021\n")))
    argv = ["--checkpoint", str(shipped_checkpoint("dates")), *flags]
    assert re.search(match, usage_error(capsys, translate_cli.main, argv))


def test_translate_and_export_name_a_checkpoint_that_is_missing_or_not_one(tmp_path, capsys):
    (tmp_path / "x.pt").write_text("not a checkpoint")
    for path in ("missing.pt", str(tmp_path / "x.pt")):
        line = usage_error(capsys, translate_cli.main, ["--checkpoint", path])
        assert "--checkpoint" in line and path.split("/")[-1] in line
        line = usage_error(capsys, export_cli.main, [path, str(tmp_path / "out.pt")])
        assert path.split("/")[-1] in line
    line = usage_error(capsys, corpus.main, ["bible-en-fr", "--out", str(tmp_path / "x.pt")])
    assert "--out" in line and "file" in line
    assert "--max-words" in usage_error(
        capsys, corpus.main, ["bible-en-fr", "--out", "o", "--max-words", "0"]
    )


def test_train_refuses_bf16_where_the_cpu_would_emulate_it(
    tmp_path, capsys, monkeypatch, tiny_dates
):
    import transformer_lib.training as training

    monkeypatch.setattr(training, "bf16_problem", lambda device: "this CPU has no native bfloat16")
    argv = [*tiny_dates, "--bf16", "--device", "cpu", "--out", str(tmp_path)]
    line = usage_error(capsys, train_cli.main, argv)
    assert "--bf16" in line and "no native bfloat16" in line
