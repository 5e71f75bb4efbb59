"""The course material beside the notebooks: quizzes, syllabus, misconceptions, 50-minute lectures.

Every quiz has 5-8 questions with answers; the student rendering holds no answer; every
"section N", "notebook NN" and "exercise N" that the material names exists in its notebook (the
heading "## N." for a section); every "§" is a section of the paper; each 50-minute lecture's
minutes add up to 50; the syllabus lists every notebook with the reading time and the number of
exercises its opening cell and exercises give.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import quizzes

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOKS = ROOT / "notebooks"
COURSE = ROOT / "course"
PAGES = ["syllabus.md", "misconceptions.md", "lectures_50min.md"]
QUIZZES = quizzes.sources()
# the paper's sections, for "§"
PAPER = {
    "1",
    "2",
    "3",
    "3.1",
    "3.2",
    "3.2.1",
    "3.2.2",
    "3.2.3",
    "3.3",
    "3.4",
    "3.5",
    "4",
    "5",
    "5.1",
    "5.2",
    "5.3",
    "5.4",
    "6",
    "6.1",
    "6.2",
    "6.3",
    "7",
}

NUMBERS = r"\d+(?:\s*(?:,|and|or|to|–|-)\s*\d+)*"
EXPLICIT_SECTION = re.compile(rf"notebook\s+(\d\d),?\s+(sections?)\s+({NUMBERS})", re.I)
EXPLICIT_EXERCISE = re.compile(
    rf"(exercises?)\s+({NUMBERS})(?:'s\s+check)?\s+of\s+notebook\s+(\d\d)", re.I
)
BARE = re.compile(rf"\b(sections?|exercises?)\s+({NUMBERS})", re.I)
NOTEBOOK = re.compile(r"\bnotebooks?\s+(\d\d)\b", re.I)
CONTEXT_HEADING = re.compile(r"^(#{1,4}) .*?\b(\d\d) · ")
CONTEXT_ITEM = re.compile(r"^\s*[-*]\s+notebook\s+(\d\d):", re.I)
PARAGRAPH = re.compile(r"\S+")


def markdown_of(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def notebook_facts() -> dict:
    """Per notebook number "03": its stem, section headings, exercises and reading time."""
    facts = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        text = markdown_of(path)
        opening = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
        reading = re.search(r"First reading[^:]*:\**\s*about (\d+) minutes", opening)
        exercises = re.findall(r"^(?:#{2,4}\s*Exercise\s+(\d+)|\*\*Exercise\s+(\d+)\.)", text, re.M)
        facts[path.stem[:2]] = {
            "stem": path.stem,
            "sections": {int(n) for n in re.findall(r"^## (\d+)\.", text, re.M)},
            "exercises": {int(a or b) for a, b in exercises},
            "reading": int(reading.group(1)) if reading else None,
        }
    return facts


FACTS = notebook_facts()


def numbers(text: str) -> list:
    """ "5", "5 and 6", "1, 3 and 5", "5–6" -> the numbers they name (a range in full)."""
    found = [int(n) for n in re.findall(r"\d+", text)]
    if re.search(r"\d\s*(?:–|-|to)\s*\d", text) and len(found) == 2:
        return list(range(found[0], found[1] + 1))
    return found


def check_reference(kind: str, nb: str, values: list, where: str, problems: list) -> None:
    if nb not in FACTS:
        problems.append(f"{where}: notebook {nb} does not exist")
        return
    have = FACTS[nb]["sections" if kind.lower().startswith("section") else "exercises"]
    for n in values:
        if n not in have:
            problems.append(
                f"{where}: notebook {nb} ({FACTS[nb]['stem']}) has no "
                f"{kind.lower().rstrip('s')} {n}"
            )


def line_contexts(text: str, default: str | None) -> list:
    """The notebook that a bare reference on each line means: ``default`` (a quiz's own), or
    the one a heading "## NN · ..." or a list item "- notebook NN: ..." sets for what it holds."""
    contexts = []
    heading_context, heading_level, item_context = None, 0, None
    for line in text.splitlines():
        heading = re.match(r"^(#{1,6}) ", line)
        if heading:
            level = len(heading.group(1))
            match = CONTEXT_HEADING.match(line)
            if match:
                heading_context, heading_level = match.group(2), level
            elif level <= heading_level:
                heading_context, heading_level = None, 0
            item_context = None
        item = CONTEXT_ITEM.match(line)
        if item:
            item_context = item.group(1)
        elif not line.strip() or re.match(r"^\s*[-*] |^\s*\d+\. ", line):
            item_context = None
        contexts.append(item_context or heading_context or default)
    return contexts


def reference_problems(text: str, default: str | None, name: str) -> list:
    """Every unresolved reference of one Markdown file: a section or exercise that its notebook
    lacks, a notebook that does not exist, or a bare "section N" with no notebook to resolve it.
    References may wrap across lines ("notebook 03,\nsection 5")."""
    problems: list = []
    contexts = line_contexts(text, default)
    line_of = lambda offset: text.count("\n", 0, offset)  # 0-based
    taken = []  # spans of explicit references
    for match in EXPLICIT_SECTION.finditer(text):
        check_reference(
            match.group(2),
            match.group(1),
            numbers(match.group(3)),
            f"{name}:{line_of(match.start()) + 1}",
            problems,
        )
        taken.append(match.span())
    for match in EXPLICIT_EXERCISE.finditer(text):
        check_reference(
            match.group(1),
            match.group(3),
            numbers(match.group(2)),
            f"{name}:{line_of(match.start()) + 1}",
            problems,
        )
        taken.append(match.span())
    for match in BARE.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        line = line_of(match.start())
        where = f"{name}:{line + 1}"
        if contexts[line] is None:
            problems.append(f"{where}: '{match.group(0)}' names no notebook")
        else:
            check_reference(
                match.group(1), contexts[line], numbers(match.group(2)), where, problems
            )
    for match in NOTEBOOK.finditer(text):
        if match.group(1) not in FACTS:
            problems.append(
                f"{name}:{line_of(match.start()) + 1}: notebook {match.group(1)} does not exist"
            )
    return sorted(problems, key=lambda p: int(p.split(":")[1]))


def course_notebooks() -> list:
    return [f["stem"] for f in FACTS.values() if "appendix" not in f["stem"]]


# --- the quizzes ----------------------------------------------------------------------------


def test_one_quiz_per_course_notebook():
    assert [p.stem for p in QUIZZES] == course_notebooks()


@pytest.mark.parametrize("path", QUIZZES, ids=lambda p: p.stem)
def test_quiz_has_5_to_8_questions_each_with_an_answer_and_a_reason(path):
    quiz = quizzes.read(path)
    assert 5 <= len(quiz.questions) <= 8, f"{path.name}: {len(quiz.questions)} questions"
    for q in quiz.questions:
        assert len(q.text) > 20 and len(q.answer) > 20 and len(q.why) > 20, (path.name, q.number)
        assert re.search(r"\bsections?\s+\d", q.why, re.I), (
            f"{path.name} Q{q.number}: the reason names no section of the notebook"
        )


@pytest.mark.parametrize("path", QUIZZES, ids=lambda p: p.stem)
def test_student_version_holds_no_answer_and_instructor_version_holds_all(path):
    quiz = quizzes.read(path)
    student, instructor = quizzes.render_student(quiz), quizzes.render_instructor(quiz)
    assert quizzes.ANSWER not in student and quizzes.WHY not in student
    for q in quiz.questions:
        assert q.text in student and q.text in instructor
        for secret in (q.answer, q.why):
            assert secret not in student, (
                f"{path.name} Q{q.number}: answer text in the student copy"
            )
            assert secret in instructor
        # no sentence of an answer leaks either (an answer's first sentence alone, say)
        for sentence in re.split(r"(?<=[.!?])\s+", q.answer):
            if len(sentence) > 40:
                assert sentence not in student, (path.name, q.number, sentence)


def test_parse_names_the_question_that_breaks_the_format():
    good = "# Quiz 03 · Attention\n\n## Q1. One\nWhat?\n\n**Answer:** this.\n\n**Why:** that.\n"
    assert quizzes.parse(good, "03_attention").questions[0].answer == "this."
    with pytest.raises(quizzes.QuizError, match="question 1: needs exactly one"):
        quizzes.parse(good.replace("**Why:** that.", ""), "03_attention")
    with pytest.raises(quizzes.QuizError, match="question Q3 where Q1 was expected"):
        quizzes.parse(good.replace("## Q1.", "## Q3."), "03_attention")
    with pytest.raises(quizzes.QuizError, match="the question is empty"):
        quizzes.parse(good.replace("What?", ""), "03_attention")
    with pytest.raises(quizzes.QuizError, match="title's number 03 is not the notebook's 05"):
        quizzes.parse(good, "05_encoder")


def test_writes_student_and_instructor_folders(tmp_path):
    students = quizzes.write_student(tmp_path / "student" / "quizzes")
    written = quizzes.write_instructor(tmp_path / "instructor")
    assert [p.name for p in students] == [p.name for p in QUIZZES]
    instructor = tmp_path / "instructor"
    assert sorted(p.name for p in (instructor / "quizzes").glob("*.md")) == [
        p.name for p in QUIZZES
    ]
    for page in PAGES:
        assert (instructor / page).read_text(encoding="utf-8") == (COURSE / page).read_text(
            encoding="utf-8"
        )
    assert len(written) == len(QUIZZES) + len(PAGES)
    first = (tmp_path / "student" / "quizzes" / QUIZZES[0].name).read_text(encoding="utf-8")
    assert "student version" in first and quizzes.ANSWER not in first


def test_command_line_without_a_folder_exits_2_with_one_line(capsys):
    assert quizzes.main([]) == 2
    assert capsys.readouterr().err == "error: give --student DIR, --instructor DIR or both\n"


def test_writing_names_a_broken_quiz(tmp_path, capsys):
    (tmp_path / "03_attention.md").write_text("# Quiz 03 · Attention\n\n## Q1. One\nWhat?\n")
    assert quizzes.write_student(tmp_path / "ok", folder=QUIZZES[0].parent)
    with pytest.raises(quizzes.QuizError, match="03_attention, question 1: needs exactly one"):
        quizzes.write_student(tmp_path / "out", folder=tmp_path)


# --- references -----------------------------------------------------------------------------


def material() -> list:
    """(name, text, default notebook) of every file of the course material checked here."""
    files = [(p.name, p.read_text(encoding="utf-8"), None) for p in (COURSE / n for n in PAGES)]
    files += [(f"quizzes/{p.name}", p.read_text(encoding="utf-8"), p.stem[:2]) for p in QUIZZES]
    return files


@pytest.mark.parametrize(
    "name,text,default",
    material(),
    ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else "",
)
def test_every_section_exercise_and_notebook_named_exists(name, text, default):
    assert reference_problems(text, default, name) == []


def test_reference_check_catches_what_does_not_exist():
    text = (
        "## 03 · Attention\nsee section 6 and section 7\n"
        "## Elsewhere\nas in section 2\nnotebook 02, sections 9–11; notebook 12\n"
        "exercise 9 of notebook 01\n- notebook 06: exercise 6 the model\n\nas notebook 05,\n"
        "section 12 shows\n"
    )
    problems = reference_problems(text, None, "t.md")
    assert problems == [
        "t.md:2: notebook 03 (03_attention) has no section 7",
        "t.md:4: 'section 2' names no notebook",
        "t.md:5: notebook 02 (02_positional_encoding) has no section 11",
        "t.md:5: notebook 12 does not exist",
        "t.md:6: notebook 01 (01_embedding) has no exercise 9",
        "t.md:7: notebook 06 (06_decoder) has no exercise 6",
        "t.md:9: notebook 05 (05_encoder) has no section 12",
    ]


@pytest.mark.parametrize(
    "name,text,default",
    material(),
    ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else "",
)
def test_paragraph_signs_are_the_papers_sections(name, text, default):
    cited = re.findall(r"§\s?(\d+(?:\.\d+)*)", text)
    assert sorted(set(cited) - PAPER) == [], f"{name}: not sections of the paper"


@pytest.mark.parametrize(
    "name,text,default",
    material(),
    ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else "",
)
def test_no_reference_outside_the_project(name, text, default):
    outside = re.findall(r"learners?'?s?'? (?:notebook|mistake) \d+|\bshared/", text, re.I)
    assert outside == []


# --- the 50-minute lectures -----------------------------------------------------------------


def lecture_blocks() -> dict:
    text = (COURSE / "lectures_50min.md").read_text(encoding="utf-8")
    blocks = re.split(r"^## (?=\d\d · )", text, flags=re.M)[1:]
    return {block[:2]: block for block in blocks}


def test_one_lecture_per_course_notebook():
    assert [FACTS[nb]["stem"] for nb in lecture_blocks()] == course_notebooks()


@pytest.mark.parametrize("nb", sorted(lecture_blocks()))
def test_lecture_minutes_add_up_to_50(nb):
    block = lecture_blocks()[nb]
    rows = re.findall(r"^\| (\d+) \|", block, re.M)
    assert rows, f"notebook {nb}: no '| min |' table"
    assert sum(int(m) for m in rows) == 50, f"notebook {nb}: {[int(m) for m in rows]}"
    for label in ("**Skip in class:**", "**In class:**", "**Homework:**"):
        assert label in block, f"notebook {nb}: no {label}"
    homework = block.split("**Homework:**")[1]
    assert re.search(r"exercises? \d", homework), f"notebook {nb}: no exercise as homework"


# --- the syllabus ---------------------------------------------------------------------------


def test_syllabus_lists_every_notebook_with_its_reading_time_and_exercises():
    syllabus = (COURSE / "syllabus.md").read_text(encoding="utf-8")
    total = 0
    for nb, facts in FACTS.items():
        rows = [
            line
            for line in syllabus.splitlines()
            if line.startswith("|") and f"`{facts['stem']}`" in line
        ]
        assert len(rows) == 1, f"the syllabus's sessions table has no row for {facts['stem']}"
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        assert facts["reading"] is not None, f"{facts['stem']}: no reading time in its opening cell"
        assert cells[3] == f"about {facts['reading']} min", (facts["stem"], cells[3])
        count = len(facts["exercises"])
        assert cells[4] == (str(count) if count else "none"), (facts["stem"], cells[4])
        total += count
    assert f"**Checked exercises** ({total}, in notebooks 01 to 09)" in syllabus
    for heading in (
        "## Objectives",
        "## Prerequisites",
        "## Sessions",
        "## Assessment",
        "## Reading",
    ):
        assert heading in syllabus
