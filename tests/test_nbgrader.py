"""The nbgrader version of the notebooks (tools/grading.py): nbgrader's own commands, run on it.

Notebook 01 is built into a temporary course; ``nbgrader generate_assignment`` releases it, two
submissions are made from the release (every answer right; one exercise that passes the visible
check but not the hidden tests, one that the checker rejects, one right) and ``nbgrader
autograde`` and ``nbgrader export`` score them: full marks, then 2 of 4; ``nbgrader
generate_feedback`` writes the graded notebooks as HTML. The tests below the nbgrader ones build
answer and test cells without nbgrader.
"""

from __future__ import annotations

import ast
import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools import grading

ROOT = Path(__file__).resolve().parent.parent

NAME = "01_embedding"
BIN = Path(sys.executable).parent
# what a student of the wrong submission wrote: Ex1 forgets to lower-case (the visible check
# uses lower-case sentences only: the hidden tests catch it), Ex2 assigns the gradients instead
# of summing them (a token used twice keeps only one of its gradients)
WRONG = {
    "exercise-1-answer": "\n".join(
        [
            "def encode_fixed(sentence, vocab, length):",
            '    ids = [vocab["<s>"]] + [vocab.get(w, vocab["<unk>"]) for w in sentence.split()]',
            '    ids = ids + [vocab["</s>"]]',
            '    return torch.tensor(ids + [vocab["<pad>"]] * (length - len(ids)))',
        ]
    ),
    "exercise-2-answer": "\n".join(
        [
            "def embedding_grad(ids, grad_out, V):",
            "    grad = torch.zeros(V, grad_out.shape[-1], dtype=grad_out.dtype)",
            "    grad[ids.reshape(-1)] = grad_out.reshape(-1, grad_out.shape[-1])",
            "    return grad",
        ]
    ),
}


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the nbgrader command line in the course folder (its alembic on the PATH, no user
    configuration read)."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_CONFIG_DIR": str(course / ".jupyter"),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def cells_by_id(nb: dict) -> dict:
    return {
        c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"] if "nbgrader" in c["metadata"]
    }


def text(cell: dict) -> str:
    return grading.cell_text(cell)


def submit(course: Path, student: str, release: dict, answers: dict) -> None:
    nb = copy.deepcopy(release)
    for grade_id, cell in cells_by_id(nb).items():
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    folder = course / "submitted" / student / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Notebook 01 built, released, submitted twice, autograded and exported."""
    course = tmp_path_factory.mktemp("course")
    points = grading.build(
        {NAME: read(ROOT / "notebooks" / f"{NAME}.ipynb")}, course, log=lambda _: None
    )
    assert points == {NAME: 4}
    nbgrader(course, "generate_assignment", NAME)
    source = cells_by_id(read(course / "source" / NAME / f"{NAME}.ipynb"))
    right = {
        gid: "\n".join(line for line in text(c).split("\n") if "### " not in line)
        for gid, c in source.items()
        if c["metadata"]["nbgrader"]["solution"]
    }
    release = read(course / "release" / NAME / f"{NAME}.ipynb")
    submit(course, "right", release, right)
    submit(course, "wrong", release, {**right, **WRONG})
    nbgrader(course, "autograde", NAME)
    nbgrader(course, "export")
    nbgrader(course, "generate_feedback", NAME)
    with open(course / "grades.csv", newline="") as f:
        scores = {
            row["student_id"]: (float(row["score"]), float(row["max_score"]))
            for row in csv.DictReader(f)
        }
    return course, scores


def test_source_version_marks_solutions_tests_and_points(course):
    folder, _ = course
    nb = read(folder / "source" / NAME / f"{NAME}.ipynb")
    graded = cells_by_id(nb)
    answers = [c for c in graded.values() if c["metadata"]["nbgrader"]["solution"]]
    tests = [c for c in graded.values() if c["metadata"]["nbgrader"]["grade"]]
    assert len(answers) == 3 and all(
        grading.BEGIN in text(c) and grading.END in text(c) for c in answers
    )
    assert [c["metadata"]["nbgrader"]["points"] for c in tests] == [1, 1, 2]
    assert all(c["metadata"]["nbgrader"]["locked"] for c in tests)
    assert all(grading.BEGIN_HIDDEN in text(c) for c in tests)
    assert "assert feedback.passed, str(feedback)" in text(tests[0])
    assert not any(grading.is_solution(c) for c in nb["cells"])  # worked solutions left out
    # the lesson's own ScaledEmbedding would answer Exercise 3: blanked as in the student copy
    assert not any(
        "class ScaledEmbedding" in text(c) or "getsource(TokenEmbedding)" in text(c)
        for c in nb["cells"]
    )
    assert (folder / "source" / NAME / "images" / "transformer_architecture.svg").is_file()
    assert "c.Execute.timeout = 900" in (folder / "nbgrader_config.py").read_text()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "nbgrader autograde 01_embedding" in readme
    assert "| `01_embedding` | 3 | `MyEmbedding` | 2 | yes |" in readme


def test_release_gives_the_stubs_back_without_hidden_tests(course):
    folder, _ = course
    release = cells_by_id(read(folder / "release" / NAME / f"{NAME}.ipynb"))
    assert text(release["exercise-1-answer"]) == (
        "def encode_fixed(sentence: str, vocab: dict, length: int) -> torch.Tensor:\n"
        "    # YOUR CODE HERE\n    raise NotImplementedError()"
    )
    assert text(release["exercise-3-answer"]).count("raise NotImplementedError()") == 2
    assert "super().__init__()" in text(release["exercise-3-answer"])
    assert "nn.Embedding(" not in text(release["exercise-3-answer"])
    for grade_id in ("exercise-1-tests", "exercise-2-tests", "exercise-3-tests"):
        assert "check_" in text(release[grade_id])
        assert "HIDDEN" not in text(release[grade_id]) and "_reference" not in text(
            release[grade_id]
        )


def test_scores_full_for_right_answers_partial_for_wrong_ones(course):
    _, scores = course
    assert scores == {"right": (4.0, 4.0), "wrong": (2.0, 4.0)}


def errors(folder: Path, student: str) -> dict:
    nb = cells_by_id(read(folder / "autograded" / student / NAME / f"{NAME}.ipynb"))
    return {
        gid: "\n".join(
            o.get("evalue", "") for o in c.get("outputs", []) if o["output_type"] == "error"
        )
        for gid, c in nb.items()
    }


def test_failed_tests_say_why(course):
    folder, _ = course
    wrong = errors(folder, "wrong")
    # the checker's "not yet", with its diagnosis, is the failed test's message
    assert (
        "Exercise 2 (the embedding's gradient as a matrix product): not yet"
        in wrong["exercise-2-tests"]
    )
    assert "gets the SUM of their gradients" in wrong["exercise-2-tests"]
    # the visible check passes; the hidden test, put back by autograde, fails and says why
    assert "lower-cased" in wrong["exercise-1-tests"] and "not yet" not in wrong["exercise-1-tests"]
    assert wrong["exercise-3-tests"] == ""
    assert not any(errors(folder, "right").values())
    feedback = (folder / "feedback" / "wrong" / NAME / f"{NAME}.html").read_text(encoding="utf-8")
    assert "gets the SUM of their gradients" in feedback


# --- without nbgrader: how answer and test cells are made -----------------------------------

COURSE_NOTEBOOKS = sorted(
    p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb") if "appendix" not in p.stem
)


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_worked_solutions_pass_every_graded_test_hidden_ones_included(path):
    """Each notebook's answer cells (the solutions, markers as comments) then its test cells,
    run after the notebook's imports: every checker and every hidden test passes."""
    nb = read(path)
    source, graded = grading.source_notebook(nb, path.stem)
    assert graded and all(g.stub_kept for g in graded)  # every stub keeps its signature
    namespace: dict = {}
    for cell in nb["cells"]:
        try:
            tree = ast.parse(text(cell)) if cell["cell_type"] == "code" else None
        except SyntaxError:
            continue
        imports = [
            n for n in getattr(tree, "body", []) if isinstance(n, (ast.Import, ast.ImportFrom))
        ]
        exec(compile(ast.Module(imports, []), str(path), "exec"), namespace)
    ran = []
    for cell in source["cells"]:
        if "nbgrader" in cell["metadata"]:
            exec(text(cell), namespace)
            ran.append(cell["metadata"]["nbgrader"]["grade_id"])
    assert len(ran) == 2 * len(graded)
    assert sum(grading.BEGIN_HIDDEN in text(c) for c in source["cells"]) == len(graded)


def test_answer_keeps_the_stub_shape_and_hides_extra_methods():
    stub = (
        "class Net(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
        "        raise NotImplementedError\n\n    def forward(self, x):\n"
        "        raise NotImplementedError"
    )
    solution = (
        "class Net(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
        "        self.w = nn.Linear(d, d)\n\n    def helper(self, x):\n        return x\n\n"
        "    def forward(self, x):\n        return self.helper(self.w(x))"
    )
    answer, kept = grading.answer_source(stub, solution)
    assert kept
    assert answer.split("\n")[:5] == [
        "class Net(nn.Module):",
        "    def __init__(self, d):",
        "        super().__init__()",
        "        ### BEGIN SOLUTION",
        "        self.w = nn.Linear(d, d)",
    ]
    # the extra method lies inside the first region: the release does not show it
    assert answer.index("def helper") < answer.index("### END SOLUTION")


def test_answer_falls_back_to_the_stub_as_a_comment():
    stub = "def f(x):\n    raise NotImplementedError"
    solution = "def g(x):\n    return x\n\n\ndef f(x):\n    return g(x)"  # helper first
    answer, kept = grading.answer_source(stub, solution)
    assert not kept
    assert answer.startswith("# Write the following (replace the `raise`):\n#     def f(x):")
    assert answer.endswith(f"{grading.BEGIN}\n{solution}\n{grading.END}")


def test_check_cell_becomes_an_assertion_with_the_feedback():
    check = "from m import check_thing\n\nprint(check_thing(my_thing))"
    test, names = grading.test_source(check)
    assert names == ["check_thing"]
    assert test == (
        "from m import check_thing\n\nfeedback = check_thing(my_thing)\n"
        "assert feedback.passed, str(feedback)\nprint(feedback)"
    )


def test_build_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(
        grading.GradingError,
        match=r"is not empty; the graded version is "
        r"written into a new folder",
    ):
        grading.build({}, tmp_path, log=lambda _: None)
