"""Exercises that are exercises: in a student copy nothing above an exercise answers it.

The table below lists, per exercise, what the full notebook shows above it that answers it
(a cell building the piece by hand, the library's source printed with ``inspect.getsource``)
and the library's own objects that answer it. The tests check that

- every such cell is tagged ``student-hide`` for that exercise, and the student copy that the
  course build writes no longer contains it (tools/student_copy.py);
- an implementation the notebook defines passes the exercise's checker in the full notebook
  (so hiding it matters), and is gone or refused in the student copy;
- the checker refuses the library's own answer: the object itself, a subclass, and code that
  calls it (exercises/own_work.py), naming the exercise's rule, while the learner's own code
  still passes;
- no cell is tagged without being in the table.
"""

from __future__ import annotations

import ast
import copy
import importlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

import pytest
import torch
from torch import nn

from tools import build_course, student_copy

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    notebook: str
    exercise: int
    checker: str  # module.function in transformer_lib.exercises
    shown: Tuple[str, ...] = ()  # text of the cells above it that answer it
    defined: Tuple[str, ...] = ()  # names those cells define: the shown implementation
    library: Tuple[str, ...] = ()  # the library's objects that answer it
    elsewhere: Tuple[Tuple[str, str], ...] = ()  # (notebook, text) shown in another notebook
    by_checker: bool = False  # the checker refuses the library's class by itself


TABLE = [
    Row(
        "01_embedding",
        3,
        "ex01_embedding.check_scaled_embedding",
        shown=("class ScaledEmbedding(nn.Module)", "print(inspect.getsource(TokenEmbedding))"),
        defined=("ScaledEmbedding",),
        library=("transformer_lib.embedding.TokenEmbedding",),
    ),
    Row(
        "02_positional_encoding",
        1,
        "ex02_positional.check_sinusoidal_table",
        shown=("print(inspect.getsource(sinusoidal_table))",),
        library=("transformer_lib.positional.sinusoidal_table",),
    ),
    Row(
        "02_positional_encoding",
        2,
        "ex02_positional.check_positional_module",
        shown=(
            "class MyPositionalEncoding(nn.Module)",
            "print(inspect.getsource(PositionalEncoding))",
        ),
        defined=("MyPositionalEncoding",),
        library=("transformer_lib.positional.PositionalEncoding",),
    ),
    Row(
        "02_positional_encoding",
        3,
        "ex02_positional.check_rotation",
        shown=("def rotation(k: int, d_model: int)",),
        defined=("rotation",),
        library=("transformer_lib.exercises.ex02_positional.reference_rotation",),
    ),
    Row(
        "03_attention",
        1,
        "ex03_attention.check_scaled_dot_product",
        library=(
            "transformer_lib.attention.attention",
            "transformer_lib.attention.fused_attention",
        ),
        elsewhere=(("04_multi_head_attention", "print(inspect.getsource(attention))"),),
    ),
    Row(
        "04_multi_head_attention",
        1,
        "ex04_heads.check_split_merge",
        shown=("heads = x.view(B, L, H, D // H).transpose(1, 2)",),
    ),
    Row(
        "04_multi_head_attention",
        2,
        "ex04_heads.check_torch_mha",
        shown=("theirs.in_proj_weight.copy_(ours.in_proj.weight)",),
        library=("transformer_lib.attention.MultiHeadAttention",),
    ),
    Row(
        "04_multi_head_attention",
        3,
        "ex04_multi_head.check_multi_head_attention",
        shown=("def split(t):", "print(inspect.getsource(MultiHeadAttention.__init__))"),
        library=("transformer_lib.attention.MultiHeadAttention",),
    ),
    Row(
        "05_encoder",
        1,
        "ex05_encoder.check_feed_forward",
        shown=("print(inspect.getsource(PositionwiseFeedForward))",),
        library=("transformer_lib.feedforward.PositionwiseFeedForward",),
    ),
    Row(
        "05_encoder",
        2,
        "ex05_encoder.check_sublayer_connection",
        shown=("print(inspect.getsource(ResidualNorm.forward))",),
        library=("transformer_lib.residual.ResidualNorm",),
    ),
    Row(
        "05_encoder",
        3,
        "ex05_encoder.check_encoder_layer_params",
        library=(
            "transformer_lib.encoder.EncoderLayer",
            "transformer_lib.params.mha_params",
            "transformer_lib.params.ffn_params",
            "transformer_lib.params.count_parameters",
        ),
    ),
    Row(
        "05_encoder",
        4,
        "ex05_encoder_layer.check_encoder_layer",
        shown=("print(inspect.getsource(EncoderLayer))",),
        library=("transformer_lib.encoder.EncoderLayer",),
    ),
    Row(
        "06_decoder",
        1,
        "ex06_decoder.check_causal_mask",
        library=("transformer_lib.masks.causal_mask", "transformer_lib.masks.decoder_mask"),
    ),
    Row(
        "06_decoder", 2, "ex06_decoder.check_cross_attention", shown=("by_hand = cross.out_proj(",)
    ),
    Row(
        "06_decoder",
        3,
        "ex06_decoder.check_transformer_params",
        library=(
            "transformer_lib.params.formula_counts",
            "transformer_lib.params.count_parameters",
        ),
    ),
    Row(
        "06_decoder",
        4,
        "ex06_assembly.check_decoder_layer",
        shown=(
            "print(inspect.getsource(DecoderLayer.__init__))",
            "print(inspect.getsource(DecoderLayer.forward))",
        ),
        library=("transformer_lib.decoder.DecoderLayer",),
        by_checker=True,
    ),
    Row(
        "06_decoder",
        5,
        "ex06_model_init.check_transformer_init",
        shown=("print(inspect.getsource(Transformer.__init__))",),
        elsewhere=(("05_encoder", "print(inspect.getsource(Transformer.__init__))"),),
    ),
    Row(
        "07_training",
        1,
        "ex07_training.check_noam_lr",
        shown=("print(inspect.getsource(noam_lr))",),
        library=("transformer_lib.training.schedule.noam_lr",),
    ),
    Row(
        "07_training",
        2,
        "ex07_training.check_label_smoothing",
        shown=("q.scatter_(-1, target.unsqueeze(-1)", "by_hand = -(q * logits.log_softmax(-1))"),
        library=(
            "transformer_lib.training.loss.LabelSmoothingLoss",
            "transformer_lib.training.loss.smoothed_targets",
        ),
    ),
    Row(
        "08_inference",
        1,
        "ex08_inference.check_greedy",
        shown=("print(inspect.getsource(greedy_decode))",),
        library=("transformer_lib.search.greedy_decode", "transformer_lib.search.beam_search"),
    ),
    Row(
        "08_inference",
        2,
        "ex08_inference.check_beam_step",
        shown=("print(inspect.getsource(Beam.advance))",),
        library=("transformer_lib.search.Beam",),
    ),
    Row(
        "08_inference",
        3,
        "ex08_inference.check_gnmt_score",
        library=("transformer_lib.search.gnmt_length_penalty",),
    ),
    Row(
        "09_translation",
        1,
        "ex09_translation.check_ngram_precision",
        library=("transformer_lib.training.metrics.clipped_matches",),
    ),
    Row(
        "09_translation",
        2,
        "ex09_translation.check_brevity_penalty",
        library=("transformer_lib.training.metrics.brevity_penalty",),
    ),
    Row(
        "09_translation",
        3,
        "ex09_translation.check_repeats",
        library=("transformer_lib.training.metrics.repeats",),
    ),
]

# A call of the library's function in the learner's own words, for the functions whose
# signature is not the exercise's: each must be refused as "calls the library's ...".
WRAPPERS = {
    "transformer_lib.training.schedule.noam_lr": lambda f: lambda step, d, w: f(step, d, w),
    "transformer_lib.search.gnmt_length_penalty": lambda f: lambda lp, n, a: lp
    / float(f(torch.tensor(n), a)),
    "transformer_lib.masks.causal_mask": lambda f: lambda T: f(T)[0, 0],
    "transformer_lib.masks.decoder_mask": lambda f: lambda T: f(
        torch.ones(1, T, dtype=torch.long), 0
    )[0, 0],
    "transformer_lib.training.loss.smoothed_targets": lambda f: lambda logits, target, eps, pad: -(
        f(target, logits.shape[-1], eps, pad) * logits.log_softmax(-1)
    )
    .sum(-1)[target != pad]
    .mean(),
    "transformer_lib.params.formula_counts": None,  # takes a config: refused by identity
    "transformer_lib.params.count_parameters": None,  # takes a model: refused by identity
    "transformer_lib.params.mha_params": lambda f: lambda d, d_ff: f(d)
    + 2 * d * d_ff
    + d_ff
    + d
    + 4 * d,
    "transformer_lib.params.ffn_params": lambda f: lambda d, d_ff: 4 * d * d
    + 4 * d
    + f(d, d_ff)
    + 4 * d,
    "transformer_lib.exercises.ex02_positional.reference_rotation": lambda f: lambda k, d: f(k, d),
}


def resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def checker(row: Row):
    module, name = row.checker.split(".")
    return getattr(importlib.import_module(f"transformer_lib.exercises.{module}"), name)


def original(name: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))


def student(name: str) -> dict:
    return build_course.student_notebook(original(name), name)


def src(cell: dict) -> str:
    return student_copy.source(cell)


def cells_with(nb: dict, text: str, before: int) -> list:
    return [i for i, c in enumerate(nb["cells"][:before]) if text in src(c)]


def row_id(row: Row) -> str:
    return f"{row.notebook[:2]}-ex{row.exercise}"


# --- the student copy -----------------------------------------------------------------------


@pytest.mark.parametrize("row", [r for r in TABLE if r.shown or r.elsewhere], ids=row_id)
def test_what_answers_an_exercise_is_tagged_and_gone_from_the_student_copy(row):
    places = [(row.notebook, text, True) for text in row.shown]
    places += [(nb, text, False) for nb, text in row.elsewhere]
    for name, text, same in places:
        nb, copy_ = original(name), student(name)
        start = build_course.exercises_start(nb)
        found = cells_with(nb, text, start)
        assert found, f"{name}: no cell above the exercises shows {text!r} (table out of date)"
        for i in found:
            cell = nb["cells"][i]
            assert student_copy.is_hidden(cell), f"{name}, cell {i} ({text!r}) is not tagged"
            meta = cell["metadata"][student_copy.KEY]
            assert meta["exercise"] == row.exercise, f"{name}, cell {i}: {meta}"
            assert ("notebook" not in meta) if same else meta.get("notebook") == row.notebook[:2]
            assert f"Exercise {row.exercise}" in src(copy_["cells"][i])
            assert copy_["cells"][i]["outputs"] == []
        start_copy = build_course.exercises_start(copy_)
        assert not cells_with(copy_, text, start_copy), (
            f"{name}: the student copy still shows {text!r} above the exercises"
        )


def every_tagged_cell():
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = original(path.stem)
        for i in student_copy.hidden_cells(nb):
            yield pytest.param(path.stem, i, id=f"{path.stem[:2]}-cell{i}")


@pytest.mark.parametrize("name,index", list(every_tagged_cell()))
def test_every_tagged_cell_is_in_the_table(name, index):
    text = src(original(name)["cells"][index])
    listed = [t for r in TABLE for t in r.shown if r.notebook == name]
    listed += [t for r in TABLE for nb, t in r.elsewhere if nb == name]
    assert any(t in text for t in listed), f"{name}, cell {index} is tagged but not in TABLE"


def definitions(code: str) -> str:
    """The cell's top-level functions, classes and plain aliases (``A = B`` or ``A = m.B``),
    without the rest: what it defines, without running its prints and plots."""
    tree = ast.parse(code)
    keep = [
        n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef))
        or (isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.Attribute)))
    ]
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


def namespace(nb: dict, index: int) -> dict:
    """The notebook's imports cell, run, then the definitions of cell ``index``."""
    imports = next(
        src(c) for c in nb["cells"] if c["cell_type"] == "code" and "import torch\n" in src(c)
    )
    scope: dict = {}
    exec(compile(imports, "<imports>", "exec"), scope)
    exec(compile(definitions(src(nb["cells"][index])), "<cell>", "exec"), scope)
    return scope


@pytest.mark.parametrize("row", [r for r in TABLE if r.defined], ids=row_id)
def test_the_shown_implementation_passes_in_full_and_not_in_the_student_copy(row):
    nb, copy_ = original(row.notebook), student(row.notebook)
    check = checker(row)
    for name in row.defined:
        index = next(
            i for i, c in enumerate(nb["cells"]) if name in build_course.defined_names(src(c))
        )
        full = check(namespace(nb, index)[name])
        assert full.passed, f"the table is wrong: {name} does not answer the exercise\n{full}"
        in_copy = namespace(copy_, index).get(name)
        if in_copy is not None:
            refused = check(in_copy)
            assert not refused.passed and "the exercise says" in str(refused), str(refused)


# --- the checkers refuse the library's own answer ---------------------------------------

LIBRARY = [
    pytest.param(row, dotted, id=f"{row_id(row)}-{dotted.rsplit('.', 1)[1]}")
    for row in TABLE
    for dotted in row.library
]


def assert_refused(feedback, how: str, row: Row) -> None:
    text = str(feedback)
    assert not feedback.passed and "not yet" in text, text
    if row.by_checker:
        assert "this is the library's" in text, text
    else:
        assert "the exercise says" in text and how in text, text


def holder(cls, make=None):
    """A module of the learner's that only wraps the library's class (built by ``make`` from
    the exercise's arguments, when they are not the class's own)."""

    class Holder(nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.inner = make(*args) if make else cls(*args, **kwargs)

        def forward(self, *args, **kwargs):
            return self.inner(*args, **kwargs)

    return Holder


def encoder_layer(d_model, h, d_ff, dropout):
    from transformer_lib import EncoderLayer, TransformerConfig

    return EncoderLayer(TransformerConfig.tiny(d_model=d_model, h=h, d_ff=d_ff, P_drop=dropout))


# the exercises that ask for a module, and the library's module wrapped in the learner's
HOLDERS = {
    ("01-ex3", "TokenEmbedding"): None,
    ("02-ex2", "PositionalEncoding"): None,
    ("04-ex3", "MultiHeadAttention"): None,
    ("05-ex1", "PositionwiseFeedForward"): None,
    ("05-ex4", "EncoderLayer"): encoder_layer,
    ("06-ex4", "DecoderLayer"): None,
}


@pytest.mark.parametrize("row,dotted", LIBRARY)
def test_the_checker_refuses_the_library_itself(row, dotted):
    obj = resolve(dotted)
    assert_refused(checker(row)(obj), "the library's", row)
    if isinstance(obj, type):
        mine = type("Mine", (obj,), {})
        assert_refused(checker(row)(mine), "subclasses the library's", row)


@pytest.mark.parametrize(
    "row,dotted",
    [p for p in LIBRARY if (row_id(p.values[0]), p.values[1].rsplit(".", 1)[1]) in HOLDERS],
)
def test_the_checker_refuses_a_module_that_holds_the_library_s(row, dotted):
    make = HOLDERS[row_id(row), dotted.rsplit(".", 1)[1]]
    assert_refused(checker(row)(holder(resolve(dotted), make)), "calls the library's", row)


@pytest.mark.parametrize(
    "row,dotted", [p for p in LIBRARY if not isinstance(resolve(p.values[1]), type)]
)
def test_the_checker_refuses_code_that_calls_the_library(row, dotted):
    fn = resolve(dotted)
    if dotted in WRAPPERS:
        if WRAPPERS[dotted] is None:
            pytest.skip(f"{dotted} takes other arguments than the exercise's function")
        wrapper = WRAPPERS[dotted](fn)
    else:

        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

    assert_refused(checker(row)(wrapper), "calls the library's", row)


def test_rows_with_a_library_answer_have_a_decorated_checker():
    for row in TABLE:
        if row.library and not row.by_checker:
            forbidden = getattr(checker(row), "forbidden", ())
            missing = [d for d in row.library if not any(resolve(d) is f for f in forbidden)]
            assert not missing, f"{row.checker} does not refuse {missing}"


def own_table(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    inv = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )  # (D/2,)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = (pos * inv).sin(), (pos * inv).cos()
    return pe  # (L, D)


def test_the_learners_own_code_passes_while_the_checker_itself_uses_the_library():
    from transformer_lib.exercises.ex02_positional import check_sinusoidal_table

    feedback = check_sinusoidal_table(own_table)
    assert feedback.passed, str(feedback)
    assert "the exercise says" not in str(feedback)


def test_a_library_call_hidden_one_level_down_is_refused():
    from transformer_lib import PositionalEncoding
    from transformer_lib.exercises.ex02_positional import check_sinusoidal_table

    def via_the_module(max_len, d_model):
        return PositionalEncoding(d_model, max_len, 0.0).pe  # calls sinusoidal_table

    assert_refused(check_sinusoidal_table(via_the_module), "calls the library's", TABLE[1])


# --- tools/student_copy.py on its own ---------------------------------------------------


def nb_of(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def code(text: str, **meta) -> dict:
    return {
        "cell_type": "code",
        "metadata": dict(meta),
        "execution_count": 3,
        "source": text,
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "shown\n"}],
    }


def test_a_getsource_print_is_dropped_and_the_rest_kept():
    cell = code(
        "x = 1\nprint(inspect.getsource(f))\nprint(x)",
        tags=["student-hide"],
        student_hide={"exercise": 2},
    )
    out = student_copy.hide_shown(nb_of(cell), "nb")["cells"][0]
    assert src(out).splitlines() == [
        "# Hidden in your copy: this cell showed the answer to Exercise 2 below.",
        "x = 1",
        "print(x)",
    ]
    assert out["outputs"] == [] and out["execution_count"] is None
    assert cell["outputs"] and "getsource" in src(cell)  # the original is untouched


def test_stand_in_code_replaces_the_cell_and_another_notebook_is_named():
    cell = code(
        "class A:\n    secret = 1\n",
        tags=["student-hide"],
        student_hide={"exercise": 5, "notebook": "06", "code": "A = B\n"},
    )
    out = student_copy.hide_shown(nb_of(cell), "nb")["cells"][0]
    assert src(out).startswith(
        "# Hidden in your copy: this cell showed the answer to Exercise 5 of notebook 06.\n"
    )
    assert src(out).endswith("\nA = B") and "secret" not in src(out)
    md = {
        "cell_type": "markdown",
        "metadata": {"tags": ["student-hide"], "student_hide": {"exercise": 1}},
        "source": "the answer",
    }
    assert (
        src(student_copy.hide_shown(nb_of(md), "nb")["cells"][0])
        == "*Hidden in your copy: this cell showed the answer to Exercise 1 below.*"
    )


def test_untagged_cells_are_unchanged():
    nb = nb_of(code("print(inspect.getsource(f))"))
    assert student_copy.hide_shown(nb, "nb") == nb


@pytest.mark.parametrize(
    "meta,message",
    [
        (None, "needs metadata 'student_hide'"),
        ({"exercise": 0}, "'exercise': N >= 1"),
        ({"exercise": True}, "'exercise': N >= 1"),
        ({"exercise": 1, "colour": "red"}, "'exercise': N >= 1"),
        ({"exercise": 1, "code": ""}, r"student_hide\['code'\] should be a non-empty str"),
        ({"exercise": 1}, "nothing would be hidden"),
    ],
)
def test_bad_tags_are_refused_naming_the_cell(meta, message):
    cell = code("x = 1", tags=["student-hide"])
    if meta is not None:
        cell["metadata"]["student_hide"] = meta
    with pytest.raises(build_course.BuildError, match=rf"nb, cell 1: .*{message}"):
        student_copy.hide_shown(nb_of(code("y = 2"), cell), "nb", error=build_course.BuildError)


def test_the_build_hides_before_it_removes_solutions():
    heading = {"cell_type": "markdown", "metadata": {}, "source": "## Exercises"}
    shown = code(
        "def f(x):\n    return 2 * x\n",
        tags=["student-hide"],
        student_hide={"exercise": 1, "code": "f = None"},
    )
    out = build_course.student_notebook(nb_of(copy.deepcopy(shown), heading), "synthetic")
    assert "return 2 * x" not in src(out["cells"][0]) and "Exercise 1" in src(out["cells"][0])


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_a_count_that_builds_the_layer_or_the_model_is_refused():
    from transformer_lib import Transformer, TransformerConfig
    from transformer_lib.exercises.ex05_encoder import check_encoder_layer_params
    from transformer_lib.exercises.ex06_decoder import check_transformer_params

    row_05, row_06 = (
        next(r for r in TABLE if (r.notebook[:2], r.exercise) == key)
        for key in (("05", 3), ("06", 3))
    )
    built = check_encoder_layer_params(lambda d, f: count(encoder_layer(d, 1, f, 0.0)))
    assert_refused(built, "calls the library's `EncoderLayer`", row_05)

    def whole(V, N, d, f):
        config = TransformerConfig.tiny(V, N=N, d_model=d, d_ff=f, h=1)
        with torch.device("meta"):
            return count(Transformer(config))

    assert_refused(check_transformer_params(whole), "calls the library's `Transformer`", row_06)
