"""The benchmark scripts: each one's --quick mode runs and prints its table, and the pieces
the tables rest on (the FLOP count, the MFU cap, the exponent fit, the packed forward pass)
are right. No timing is asserted: figures from a quick run mean nothing.

The scripts run in this process (``main(argv)``; their folder is on the test path, see
pyproject.toml), which saves a PyTorch import each; the scripts that time other processes
start those as they always do.
"""

import contextlib
import importlib
import io
import shutil

import pytest
import torch

SCRIPTS = {  # script -> what its table must show
    "train_throughput": ["matmul peak", "torch.nn.Transformer", "+ accelerate, no kernels", "MFU"],
    "decode_cache": ["no cache ms", "same tokens", "cache KiB"],
    "attention_memory": ["explicit MiB", "fused MiB", "is_causal MiB"],
    "scaling": ["Step time against length", "Step time against batch"],
    "profile_step": ["Training step profile", "matmul", "optimizer (Adam)"],
    "padding": ["packed speed-up", "length-sorted (token_batches)"],
    "score_translation": ["| copy the source |", "| greedy |", "| beam 4, alpha 0.6 |"],
    "capstone_run": ["training s", "last loss", "test exact match"],
    "modern": [
        "| enc-dec (5 steps) | 1,310,208 |",
        "| lm (5 steps) | 1,308,672 |",
        "| lm, equal time",
    ],
}
if shutil.which("c++"):  # the compiled kernels row, and Inductor, where they can be built
    SCRIPTS["train_throughput"].append("+ compiled kernels")
    SCRIPTS["inductor_cpu"] = ["bool mask y <= 0", "feed-forward step", "fast.compile_model"]


def run(name, *args):
    """The script's ``main(["--quick", "--threads", "1", *args])``, run in this process; its
    standard output. PyTorch's threads, random state and compiled graphs are restored."""
    threads, out = torch.get_num_threads(), io.StringIO()
    try:
        with torch.random.fork_rng(), contextlib.redirect_stdout(out):
            code = importlib.import_module(name).main(["--quick", "--threads", "1", *args])
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def quick():
    """``quick(name)``: the output of the script's --quick run, run once for the module."""
    outputs = {}

    def output(name):
        if name not in outputs:
            outputs[name] = run(name)
        return outputs[name]

    return output


def table_rows(out):
    """The cells of every Markdown table row of ``out`` (header and separator left out)."""
    lines = [line for line in out.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return [r for r in rows if not set("".join(r)) <= set("-:")]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_quick_mode_prints_its_table(quick, script):
    out = quick(script)
    for heading in SCRIPTS[script]:
        assert heading in out, out


def test_train_throughput_names_the_machine_and_caps_mfu_at_one_hundred_percent(quick):
    out = quick("train_throughput")
    assert out.startswith("# machine: ") and "native bf16: " in out.splitlines()[0]
    rows = [r for r in table_rows(out) if r[0] == "tiny"]  # preset, dtype, model, ..., MFU
    assert rows and all(0 <= int(r[-1].rstrip("%")) <= 100 for r in rows), out
    assert {r[6] for r in rows if r[2] == "torch.nn.Transformer"} == {"1.00x"}


def test_train_throughput_leaves_tf32_out_on_a_cpu_and_cuda_without_a_gpu():
    out = run("train_throughput", "--dtypes", "tf32", "fp32", "--no-compiled-kernels")
    assert "# tf32 left out:" in out
    assert {r[1] for r in table_rows(out) if r[0] == "tiny"} == {"fp32"}
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="--device cuda: PyTorch sees no CUDA GPU"):
            run("train_throughput", "--device", "cuda")


def test_isolated_mode_times_each_model_in_its_own_process():
    out = run(
        "train_throughput",
        "--isolated",
        "--dtypes",
        "fp32",
        "--no-compiled-kernels",
        "--no-accelerate",
    )
    assert "each model in its own process" in out
    models = [r[2] for r in table_rows(out) if r[:2] == ["tiny", "fp32"]]
    assert models == ["torch.nn.Transformer", "transformer_lib"]
    assert "# step times:" not in out  # the children's lines stay theirs


def test_decode_cache_gives_the_same_tokens_with_and_without_the_cache(quick):
    rows = table_rows(quick("decode_cache"))[1:]
    assert len(rows) == 2 and all(r[5] == "yes" for r in rows), rows
    assert int(rows[1][6].replace(",", "")) > int(rows[0][6].replace(",", ""))  # grows


def test_run_all_runs_the_scripts_it_is_given(capfd):
    import run_all

    assert run_all.main(["--quick", "--threads", "1", "--scripts", "decode_cache.py"]) == 0
    out = capfd.readouterr().out
    assert "## decode_cache.py --quick --threads 1" in out and "no cache ms" in out
    assert "All benchmarks:" in out


def test_time_to_bleu_quick_reports_bleu_per_budget_and_names_the_cpu(quick):
    """--quick trains a tiny stand-in of the English->French recipe through the training
    command line for a few seconds and scores a handful of test verses."""
    from common import cpu_model

    out = quick("time_to_bleu")
    assert f"8 test verses; CPU: {cpu_model()}" in out, out
    assert "-m transformer_lib.train --corpus bible-en-fr" in out
    rows = table_rows(out)
    assert rows[0] == [
        "minutes",
        "steps",
        "train s",
        "process s",
        "BLEU greedy",
        "BLEU beam 4",
        "scoring s",
    ]
    assert len(rows) == 2 and rows[1][0] == "0.05", out
    assert int(rows[1][1].replace(",", "")) >= 1  # steps trained
    assert all(0.0 <= float(b) <= 100.0 for b in rows[1][4:6])


def test_utilisation_is_never_above_one_hundred_percent():
    from common import utilisation

    mfu, note = utilisation({"a": 50e9, "b": 80e9}, 100e9)
    assert mfu == {"a": 0.5, "b": 0.8} and note == ""
    mfu, note = utilisation({"a": 50e9, "b": 160e9}, 100e9)  # a peak measured too low
    assert mfu == {"a": 50 / 160, "b": 1.0}
    assert "row 'b' ran at 160.0 GFLOP/s, above the measured matmul peak 100.0" in note


def test_interleaved_rounds_rotate_the_order():
    from common import interleaved

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = interleaved(fns, torch.device("cpu"), reps=3, warmup=0)
    assert calls == list("abcbcacab")
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3, "c": 3}


def test_fit_exponent_recovers_a_power_law():
    from scaling import fit_exponent

    sizes = [4, 8, 16, 32]
    k, a = fit_exponent(sizes, [0.5 * s**1.7 for s in sizes])
    assert abs(k - 1.7) < 1e-9 and abs(a - 0.5) < 1e-9


def test_matmul_flops_count_by_hand():
    from transformer_lib.config import TransformerConfig
    from workload import matmul_flops, step_matmul_shapes

    c = TransformerConfig.tiny(10, N=1, d_model=4, d_ff=8, h=2)
    B, S, T, D, F, V = 2, 3, 5, 4, 8, 10
    enc = S * (4 * D * D + 2 * D * F)
    dec = T * (4 * D * D + 2 * D * D + 2 * D * F + D * V) + S * 2 * D * D
    attn = 2 * (S * S + T * T + T * S) * D
    assert matmul_flops(c, B, S, T) == 3 * 2 * B * (enc + dec + attn)
    shapes = step_matmul_shapes(c, B, S, T)
    assert (B * T, D, V) in shapes and (B * T, V, D) in shapes and (V, B * T, D) in shapes


def test_both_models_of_the_workload_have_the_same_parameters_but_one_layer_norm():
    """The comparison is fair: the same embeddings, output layer and layer shapes; only
    torch.nn.Transformer's final LayerNorm of each stack is extra."""
    from transformer_lib.config import TransformerConfig
    from workload import make_model

    c = TransformerConfig.tiny(50, N=2, d_model=16, d_ff=32, h=2)
    ours, theirs = (
        sum(p.numel() for p in make_model(label, c, torch.device("cpu")).parameters())
        for label in ("transformer_lib", "torch.nn.Transformer")
    )
    assert theirs - ours == 2 * 2 * c.d_model


@pytest.mark.parametrize("norm_first", [False, True])
def test_packed_forward_equals_the_model_where_it_counts(norm_first):
    """Skipping padded positions changes neither the logits at real target positions nor
    the loss and its gradients (dropout off, so both passes see the same network)."""
    import torch.nn.functional as F

    from padding import packed_forward, padded_batch
    from transformer_lib.config import TransformerConfig
    from transformer_lib.model import Transformer

    c = TransformerConfig.tiny(50, N=2, d_model=16, d_ff=32, h=2, P_drop=0.0, norm_first=norm_first)
    src, tgt = padded_batch(c, 5, 9, 0.3, torch.device("cpu"), torch.Generator().manual_seed(3))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    assert (src == c.pad_id).any() and (tgt_in == c.pad_id).any()
    torch.manual_seed(0)
    model = Transformer(c).train()
    grads = []
    for forward in (model, lambda s, t: packed_forward(model, s, t)):
        model.zero_grad()
        logits = forward(src, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=c.pad_id)
        loss.backward()
        grads.append((logits.detach(), loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (ref, ref_loss, ref_grads), (got, got_loss, got_grads) = grads
    real = tgt_in != c.pad_id
    torch.testing.assert_close(got[real], ref[real], rtol=1e-5, atol=1e-5)
    assert (got[~real] == 0).all()
    torch.testing.assert_close(got_loss, ref_loss, rtol=1e-5, atol=1e-6)
    for g, r in zip(got_grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)


def test_table3_quick_trains_two_rows_with_the_command_line_and_writes_their_scores(tmp_path):
    """--quick: the base and row (E) for 5 steps on seed 0; the JSON holds the machine, the
    commit and each run's scores, and row (E) adds exactly its position table's parameters."""
    import json

    from common import cpu_model

    out = run("table3", "--out", str(tmp_path / "t3.json"))
    record = json.loads((tmp_path / "t3.json").read_text())
    assert record["machine"].startswith(cpu_model()) and len(record["commit"]) == 40
    runs = {r["name"]: r for r in record["runs"]}
    assert list(runs) == ["base", "learned"] and record["seeds"] == [0] and record["steps"] == 5
    assert runs["learned"]["params"] - runs["base"]["params"] == 128 * 128  # max_len x d_model
    for r in runs.values():
        assert 1 < r["ppl"] < 10_000 and 0 <= r["bleu_greedy"] <= 100 and r["train_seconds"] > 0
    rows = table_rows(out)
    assert rows[0][:4] == ["row", "change", "params", "dev ppl"]
    assert [r[:2] for r in rows[1:]] == [["base", "base"], ["E", "learned"]]


def test_table3_refuses_a_malformed_row_of_ones_own_before_training(capsys):
    from pathlib import Path

    import table3

    with pytest.raises(SystemExit):
        table3.parse(["--change", "warmup 100"])
    assert "--change: expected FLAG=VALUE or FLAG" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        table3.parse(["--only", "h=3"])
    args = table3.parse(["--change", "warmup=100", "no-norm-first"])
    assert args.own == (
        "own",
        "warmup=100,no-norm-first",
        {"--warmup": "100", "--no-norm-first": None},
    )
    command = table3.train_command(args.own[2], 0, 10, Path("d"), Path("o"), args)
    assert command.index("--no-norm-first") > command.index("--norm-first")  # the change wins
    assert command[command.index("--warmup") + 1] == "100" and None not in command


def test_the_committed_comparison_holds_every_model_of_the_script_and_its_own_arithmetic():
    """benchmarks/modern.json, which notebook 13 reads, is the output of today's modern.py:
    every model it trains, each seed, the language model of the encoder-decoder's time at the
    step count its speeds give, and the two architectures at equal parameters (0.2 %)."""
    import json
    from pathlib import Path

    import modern

    table = json.loads((Path(modern.__file__).parent / "modern.json").read_text("utf-8"))
    runs, speeds = table["runs"], table["speeds"]
    expected = [*modern.MODELS, "lm, equal time"]
    assert list(dict.fromkeys(r["model"] for r in runs)) == expected
    assert sorted(speeds) == sorted(expected)
    for name in expected:
        mine = [r for r in runs if r["model"] == name]
        assert [r["seed"] for r in mine] == table["seeds"], name
        assert {"ppl", "bleu", "params", "cache_bytes_per_token"} <= set(mine[0]), name
    ratio = speeds["lm"]["train_tokens_per_s"] / speeds["enc-dec"]["train_tokens_per_s"]
    steps = {r["model"]: r["steps"] for r in runs}
    assert steps["lm, equal time"] == max(1, round(table["steps"] * ratio))
    assert all(s == table["steps"] for m, s in steps.items() if m != "lm, equal time")
    params = {r["model"]: r["params"] for r in runs}
    assert abs(params["lm"] - params["enc-dec"]) / params["enc-dec"] < 0.002
    assert params["swiglu"] <= params["lm"] and params["mqa"] < params["gqa"] < params["lm"]


PO = """# a translation catalogue
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#: views.py:1
msgid "Save the page"
msgstr "Seite speichern"

#, fuzzy
msgid "Draft"
msgstr "Entwurf?"

#. Default: "Delete this item"
msgid "label_delete_item"
msgstr ""
"Diesen Eintrag "
"löschen"

msgid "One file"
msgid_plural "%(n)s files"
msgstr[0] "Eine Datei"
msgstr[1] "%(n)s Dateien"

msgid "Hello <b>you</b>"
msgstr "Hallo <b>du</b>"
msgid "Close"
msgstr "Schließen"
"""


def test_own_corpus_reads_gettext_catalogues_and_keeps_plain_translated_text(tmp_path):
    """The corpus of ``benchmarks/own_corpus.py``: every translated, non-fuzzy message of
    a wheel's ``de`` catalogues (continued strings joined, Plone's ids replaced by their
    English default, the first plural form), without markup or placeholders; split by a
    hash of the English side. Then one --quick run through the training command line."""
    import zipfile

    import own_corpus

    assert own_corpus.po_messages(PO)[1:] == [
        ("Save the page", "Seite speichern", "#: views.py:1\n"),
        ("Draft", "Entwurf?", "#, fuzzy\n"),
        ("label_delete_item", "Diesen Eintrag löschen", '#. Default: "Delete this item"\n'),
        ("One file", "Eine Datei", ""),
        ("Hello <b>you</b>", "Hallo <b>du</b>", ""),
        ("Close", "Schließen", ""),
    ]
    for spec in own_corpus.WHEELS:  # stand-ins for the three wheels, nothing downloaded
        name, version = spec.split("==")
        stem = name.replace(".", "_")
        with zipfile.ZipFile(tmp_path / f"{stem}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"{stem}/locale/de/LC_MESSAGES/{stem}.po", PO)
            z.writestr(f"{stem}/locale/fr/LC_MESSAGES/{stem}.po", "")
            many = "".join(
                f'msgid "{stem} item {i}"\nmsgstr "{stem} Eintrag {i}"\n\n' for i in range(60)
            )
            z.writestr(f"{stem}/locale/de/LC_MESSAGES/more.po", many)
    splits = own_corpus.build("de", tmp_path)
    pairs = [p for split in splits.values() for p in split]
    assert ("Delete this item", "Diesen Eintrag löschen") in pairs
    assert ("One file", "Eine Datei") in pairs and ("Close", "Schließen") in pairs
    assert not [p for p in pairs if p[0] in ("Draft", "Hello <b>you</b>", "")]
    assert len(pairs) == len({en for en, _ in pairs}) == 4 + 3 * 60  # each English once
    assert 0 < len(splits["valid"]) < len(splits["train"]) and splits["test"]
    out = run(
        "own_corpus", "--cache", str(tmp_path), "--out", str(tmp_path / "runs"), "--only", "default"
    )
    assert "-m transformer_lib.train --train-file" in out and "English->de" in out
    (row,) = table_rows(out)[1:]
    assert row[0] == "default" and int(row[2].replace(",", "")) >= 1
    assert all(0.0 <= float(b) <= 100.0 for b in row[4:6])
