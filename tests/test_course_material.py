"""The course material beside the notebooks: lesson plans, quizzes, speaker notes, answer notes,
syllabus, misconceptions, 50-minute lectures.

Every reference resolves to the notebook it names, by title: a section is cited as
``§N "Title"`` (the start of its heading; ``§ "Summary"`` for an unnumbered one) and an
exercise as ``Exercise K "title"``, either prefixed by its notebook's number (``04 §5 "..."``)
or, in a file of one notebook (``NN_name.md``), of that one; a bare ``§3.2.1`` is the paper's;
"notebook NN" exists; no reference is by number alone (``section 4``, ``Exercise 2``, ``cell
12``). Every quiz has 5-8 questions with answers, and the student rendering holds no answer;
every plan's clock adds up; each 50-minute lecture's minutes add up to 50; the syllabus lists
every notebook with the reading time and the number of exercises its notebook gives.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kit_build import NOTEBOOKS
from tools import quizzes
from tools.kit_base import course_notebooks, exercises, read_notebook, source

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT / "course"
PAGES = ["syllabus.md", "misconceptions.md", "lectures_50min.md"]
QUIZZES = quizzes.sources()
PLANS = COURSE / "plans"
# the paper's sections, for a bare "§"
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

SECTION_REF = re.compile(r'(?:\b(\d\d)\s)?§(\d+)?\s*"([^"]+)"')
EXERCISE_REF = re.compile(r'(?:\b(\d\d)\s)?(?:Exercise|Ex\.)\s(\d+)\s+"([^"]+)"')
PAPER_REF = re.compile(r'§(\d+(?:\.\d+)*)(?![\d.]|\s*")')
BY_NUMBER = re.compile(
    r'\b(?:[Ss]ections?\s\d+|[Cc]ells?\s\d+|(?:[Ee]xercises?|Ex\.)\s\d+(?!\d|\s+"|\s+—))'
)
NOTEBOOK = re.compile(r"\bnotebooks? (\d\d)\b")


def plain(text: str) -> str:
    """A title as a reference quotes it: no Markdown or TeX marks, one space, lower case."""
    return re.sub(r"\s+", " ", re.sub(r"[`*$\\{}]|\\text", "", text)).strip().lower()


def notebook_facts() -> dict:
    """Per notebook number "03": its stem, headings (number or None -> titles), exercises
    (number -> title), reading time and the number of exercises."""
    facts = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = read_notebook(path)
        headings = {}
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for line in source(cell).splitlines():
                match = re.match(r"^#{2,3} (?:(\d+)\. )?(.+?)\s*$", line)
                if match:
                    number = int(match.group(1)) if match.group(1) else None
                    headings.setdefault(number, []).append(plain(match.group(2)))
        reading = re.search(r"about (\d+) minutes", source(nb["cells"][0]))
        facts[path.stem[:2]] = {
            "stem": path.stem,
            "headings": headings,
            "exercises": {ex.number: plain(ex.title) for ex in exercises(nb, path.stem)},
            "reading": int(reading.group(1)) if reading else None,
        }
    return facts


FACTS = notebook_facts()


def context(text: str, at: int, default: str | None) -> str | None:
    """The notebook a reference without a number means: the last one named before it in its
    paragraph or table row (``04 §1 "..." and §5 "..."``), else the one of the heading it is
    under (``## 04 · Multi-head attention``), else the file's own."""
    start = max(text.rfind("\n\n", 0, at), text.rfind("\n|", 0, at))
    named = re.findall(
        r"\b(\d\d) (?:§|Exercise|Ex\.)|^\|[^|\n]*\|[^|\n]*\| (\d\d) \|", text[start + 1 : at], re.M
    )
    headings = re.findall(r"^#{1,4} (?:(\d\d) · )?", text[:at], re.M)
    return next((a or b for a, b in reversed(named)), (headings or [""])[-1] or default)


def reference_problems(text: str, default: str | None, name: str, facts=None) -> list:
    """Every reference of one Markdown file that does not resolve, with its line."""
    FACTS = facts or globals()["FACTS"]  # noqa: N806
    problems = []
    line = lambda m: text.count("\n", 0, m.start()) + 1  # noqa: E731
    for match in SECTION_REF.finditer(text):
        nb = match.group(1) or context(text, match.start(), default)
        number, title = match.group(2), plain(match.group(3))
        where = f"{name}:{line(match)}: {match.group(0)!r}"
        if nb not in FACTS:
            problems.append(
                f"{where} names no notebook"
                if nb is None
                else f"{where}: notebook {nb} does not exist"
            )
            continue
        titles = FACTS[nb]["headings"].get(int(number) if number else None, [])
        if not any(t.startswith(title) for t in titles):
            problems.append(
                f"{where}: {FACTS[nb]['stem']} has no such section "
                f"(its §{number or ''} reads {titles})"
            )
    for match in EXERCISE_REF.finditer(text):
        nb = match.group(1) or context(text, match.start(), default)
        number, title = int(match.group(2)), plain(match.group(3))
        where = f"{name}:{line(match)}: {match.group(0)!r}"
        if nb not in FACTS:
            problems.append(f"{where} names no notebook")
        elif not FACTS[nb]["exercises"].get(number, "\0").startswith(title):
            problems.append(
                f"{where}: {FACTS[nb]['stem']}'s Exercise {number} is "
                f"{FACTS[nb]['exercises'].get(number)!r}"
            )
    for match in PAPER_REF.finditer(text):
        if match.group(1) not in PAPER:
            problems.append(f"{name}:{line(match)}: §{match.group(1)} is no section of the paper")
    for match in BY_NUMBER.finditer(text):
        problems.append(
            f"{name}:{line(match)}: {match.group(0)!r} refers by number alone: "
            'cite §N "Title" or Exercise K "title"'
        )
    for match in NOTEBOOK.finditer(text):
        if match.group(1) not in FACTS:
            problems.append(f"{name}:{line(match)}: notebook {match.group(1)} does not exist")
    return problems


def names() -> list:
    return [p.stem for p in course_notebooks(NOTEBOOKS)]


# --- the quizzes ----------------------------------------------------------------------------


def test_one_quiz_per_course_notebook():
    assert [p.stem for p in QUIZZES] == names()


@pytest.mark.parametrize("path", QUIZZES, ids=lambda p: p.stem)
def test_quiz_has_5_to_8_questions_each_with_an_answer_and_a_reason(path):
    quiz = quizzes.read(path)
    assert 5 <= len(quiz.questions) <= 8, f"{path.name}: {len(quiz.questions)} questions"
    for q in quiz.questions:
        assert len(q.text) > 20 and len(q.answer) > 20 and len(q.why) > 20, (path.name, q.number)
        assert SECTION_REF.search(q.why), (
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
    """(name, text, default notebook) of every file of the course material."""
    files = [(n, (COURSE / n).read_text(encoding="utf-8"), None) for n in PAGES]
    files.append(
        ("answer_notes.md", (COURSE / "answer_notes.md").read_text(encoding="utf-8"), None)
    )
    for folder in ("plans", "quizzes", "speaker_notes"):
        for path in sorted((COURSE / folder).glob("*.md")):
            own = path.stem[:2] if path.stem[:2].isdigit() else None
            files.append((f"{folder}/{path.name}", path.read_text(encoding="utf-8"), own))
    return files


@pytest.mark.parametrize("name,text,default", material(), ids=[m[0] for m in material()])
def test_every_reference_resolves_by_title(name, text, default):
    assert reference_problems(text, default, name) == []


def test_the_reference_check_catches_what_does_not_resolve():
    facts = {
        "03": {
            "stem": "03_attention",
            "exercises": {1: "a key mask from lengths"},
            "headings": {5: ["masks"], None: ["summary", "exercises"]},
        }
    }
    good = '§5 "Masks", 03 §5 "masks", § "Summary", Exercise 1 "a key mask", §3.2.1, notebook 03'
    assert reference_problems(good, "03", "t.md", facts) == []
    bad = (
        '§5 "Masks"\n03 §4 "Masks" and §5 "Heads"\n03 Exercise 1 "a prefix"\n'
        "§3.9, section 4, Exercise 2, cell 12, notebook 42\n"
    )
    problems = [p.split(":", 1)[1] for p in reference_problems(bad, None, "t.md", facts)]
    assert problems == [
        "1: '§5 \"Masks\"' names no notebook",
        "2: '03 §4 \"Masks\"': 03_attention has no such section (its §4 reads [])",
        "2: '§5 \"Heads\"': 03_attention has no such section (its §5 reads ['masks'])",
        "3: '03 Exercise 1 \"a prefix\"': 03_attention's Exercise 1 is 'a key mask from lengths'",
        "4: §3.9 is no section of the paper",
        '4: \'section 4\' refers by number alone: cite §N "Title" or Exercise K "title"',
        '4: \'Exercise 2\' refers by number alone: cite §N "Title" or Exercise K "title"',
        '4: \'cell 12\' refers by number alone: cite §N "Title" or Exercise K "title"',
        "4: notebook 42 does not exist",
    ]


# --- the lesson plans -----------------------------------------------------------------------


def minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def timeline(text: str) -> list:
    """(start, minutes, row) of each timed table row."""
    rows = []
    for row in text.splitlines():
        m = re.match(r"^\|\s*(\d{1,2}:\d\d)\s*\|\s*(\d+)\s*\|", row)
        if m:
            rows.append((minutes(m.group(1)), int(m.group(2)), row))
    return rows


@pytest.mark.parametrize("plan", sorted(p.name for p in PLANS.glob("*.md")))
def test_a_plans_clock_adds_up(plan):
    rows = timeline((PLANS / plan).read_text(encoding="utf-8"))
    assert rows, f"{plan}: no timeline"
    sessions = [[rows[0]]]
    for row in rows[1:]:
        if row[0] < sessions[-1][-1][0]:
            sessions.append([])  # a second session starts at 0:00 again
        sessions[-1].append(row)
    for session in sessions:
        for (start, length, row), (following, _, _) in zip(session, session[1:]):
            assert start + length == following, (
                f"{plan}: {row.strip()[:60]!r} ends at {start + length}, the next row "
                f"starts at {following} (minutes)"
            )
    ends = [s[-1][0] + s[-1][1] - s[0][0] for s in sessions]
    if plan == "course_1_day.md":
        assert sessions[0][0][0] == minutes("09:00") and ends == [8 * 60]
    elif plan == "course_2_sessions.md":
        assert ends == [180, 180]
    else:
        assert ends == [90], f"{plan}: a 90-minute session lasts {ends} minutes"


def test_one_plan_one_quiz_and_one_deck_of_notes_per_notebook():
    for folder in ("plans", "quizzes", "speaker_notes"):
        have = sorted(p.stem for p in (COURSE / folder).glob("[0-9][0-9]_*.md"))
        assert have == names(), folder


# --- the 50-minute lectures -----------------------------------------------------------------


def lecture_blocks() -> dict:
    text = (COURSE / "lectures_50min.md").read_text(encoding="utf-8")
    blocks = re.split(r"^## (?=\d\d · )", text, flags=re.M)[1:]
    return {block[:2]: block for block in blocks}


def test_one_lecture_per_course_notebook():
    assert [FACTS[nb]["stem"] for nb in lecture_blocks()] == names()


@pytest.mark.parametrize("nb", sorted(lecture_blocks()))
def test_lecture_minutes_add_up_to_50(nb):
    block = lecture_blocks()[nb]
    rows = re.findall(r"^\| (\d+) \|", block, re.M)
    assert rows, f"notebook {nb}: no '| min |' table"
    assert sum(int(m) for m in rows) == 50, f"notebook {nb}: {[int(m) for m in rows]}"
    for label in ("**Skip in class:**", "**In class:**", "**Homework:**"):
        assert label in block, f"notebook {nb}: no {label}"
    homework = block.split("**Homework:**")[1]
    assert EXERCISE_REF.search(homework), f"notebook {nb}: no exercise as homework"


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
    last = max(facts["stem"][:2] for facts in FACTS.values() if facts["exercises"])
    assert f"**Checked exercises** ({total}, in notebooks 01 to {last})" in syllabus
    for heading in (
        "## Objectives",
        "## Prerequisites",
        "## Sessions",
        "## Assessment",
        "## Reading",
    ):
        assert heading in syllabus
