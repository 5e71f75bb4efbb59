"""Concept quizzes: one Markdown source per notebook, rendered for students and instructors.

    python tools/quizzes.py --student DIR --instructor DIR   # write both versions

The sources are ``course/quizzes/NN_name.md``, one per notebook of the course. Format::

    # Quiz 03 · Attention

    One optional paragraph: what the quiz covers (kept in both versions).

    ## Q1. A short title
    The question: any Markdown (options as a list, formulas, code).

    **Answer:** the answer, one paragraph or more.

    **Why:** where the notebook shows it, with its section ("section 4"; "notebook 02,
    section 6" for another notebook; "§3.2.1" for the paper only).

Questions are numbered 1, 2, ... in order; each has exactly one ``**Answer:**`` and one
``**Why:**``, in that order, after its question. The student version keeps the title, the
introduction and the questions, with a line to answer on; the instructor version adds each
answer and its reason. ``write_student`` and ``write_instructor`` are what the course build
calls; ``write_instructor`` also copies the syllabus, the misconceptions and the 50-minute
lecture variants of ``course/``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT / "course"
SOURCES = COURSE / "quizzes"
# instructor material copied as it is, beside the lesson plans
INSTRUCTOR_PAGES = ("syllabus.md", "misconceptions.md", "lectures_50min.md")

TITLE = re.compile(r"^# (Quiz (\d\d) · .+)$")
QUESTION = re.compile(r"^## Q(\d+)\. (.+)$")
ANSWER = "**Answer:**"
WHY = "**Why:**"


class QuizError(ValueError):
    """A quiz source does not follow the format; the message names the file and question."""


@dataclass(frozen=True)
class Question:
    number: int
    title: str
    text: str  # the question, Markdown
    answer: str
    why: str


@dataclass(frozen=True)
class Quiz:
    name: str  # the notebook's name, e.g. "03_attention"
    title: str  # "Quiz 03 · Attention"
    intro: str
    questions: List[Question]


def _block(lines: List[str]) -> str:
    return "\n".join(lines).strip()


def _question(name: str, number: int, title: str, lines: List[str]) -> Question:
    where = f"{name}, question {number}"
    body = "\n".join(lines)
    if body.count(ANSWER) != 1 or body.count(WHY) != 1:
        raise QuizError(
            f"{where}: needs exactly one {ANSWER} and one {WHY}, "
            f"got {body.count(ANSWER)} and {body.count(WHY)}"
        )
    text, rest = body.split(ANSWER)
    answer, why = rest.split(WHY)
    parts = {"question": text.strip(), "answer": answer.strip(), "why": why.strip()}
    for part, value in parts.items():
        if not value:
            raise QuizError(f"{where}: the {part} is empty")
    return Question(number, title.strip(), parts["question"], parts["answer"], parts["why"])


def parse(text: str, name: str) -> Quiz:
    """A quiz from its Markdown source; ``name`` (the notebook's, "03_attention") for messages."""
    lines = text.strip().splitlines()
    title = TITLE.match(lines[0]) if lines else None
    if title is None:
        raise QuizError(
            f"{name}: the first line must be '# Quiz NN · Title', "
            f"got {lines[0] if lines else 'an empty file'!r}"
        )
    if title.group(2) != name[:2]:
        raise QuizError(
            f"{name}: the title's number {title.group(2)} is not the notebook's {name[:2]}"
        )
    intro: List[str] = []
    questions: List[Question] = []
    current: Optional[tuple] = None  # (number, title, lines)
    for line in lines[1:]:
        match = QUESTION.match(line)
        if match:
            if current:
                questions.append(_question(name, *current))
            number = int(match.group(1))
            if number != len(questions) + 1:
                raise QuizError(
                    f"{name}: question Q{number} where Q{len(questions) + 1} was expected"
                )
            current = (number, match.group(2), [])
        elif current:
            current[2].append(line)
        else:
            intro.append(line)
    if current:
        questions.append(_question(name, *current))
    if not questions:
        raise QuizError(f"{name}: no questions ('## Q1. ...')")
    return Quiz(name, title.group(1), _block(intro), questions)


def read(path: Path) -> Quiz:
    return parse(Path(path).read_text(encoding="utf-8"), Path(path).stem)


def sources(folder: Path = SOURCES) -> List[Path]:
    """The quiz sources, ``NN_name.md``, in order."""
    return sorted(Path(folder).glob("[0-9][0-9]_*.md"))


def _render(quiz: Quiz, with_answers: bool) -> str:
    version = "instructor version, with answers" if with_answers else "student version"
    out = [f"# {quiz.title} ({version})", ""]
    if quiz.intro:
        out += [quiz.intro, ""]
    for q in quiz.questions:
        out += [f"## Q{q.number}. {q.title}", "", q.text, ""]
        if with_answers:
            out += [f"{ANSWER} {q.answer}", "", f"{WHY} {q.why}", ""]
        else:
            out += ["*Your answer:*", "", ""]
    return "\n".join(out).rstrip() + "\n"


def render_student(quiz: Quiz) -> str:
    """Title, introduction and questions: no answer and no reason."""
    return _render(quiz, with_answers=False)


def render_instructor(quiz: Quiz) -> str:
    """Everything: each question followed by its answer and why."""
    return _render(quiz, with_answers=True)


def _write(dest: Path, render, folder: Path) -> List[Path]:
    paths = sources(folder)
    if not paths:
        raise QuizError(f"no quiz sources NN_name.md in {folder}")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        target = dest / path.name
        target.write_text(render(read(path)), encoding="utf-8")
        written.append(target)
    return written


def write_student(dest: Path, folder: Path = SOURCES) -> List[Path]:
    """Write every quiz's student version into ``dest`` (created); return the files."""
    return _write(Path(dest), render_student, folder)


def write_instructor(dest: Path, folder: Path = SOURCES, course: Path = COURSE) -> List[Path]:
    """Write every quiz's instructor version into ``dest/quizzes`` and copy the syllabus, the
    misconceptions and the 50-minute lecture variants into ``dest``; return the files."""
    written = _write(Path(dest) / "quizzes", render_instructor, folder)
    for page in INSTRUCTOR_PAGES:
        source = Path(course) / page
        if not source.is_file():
            raise QuizError(f"missing course page {source}")
        written.append(Path(shutil.copy2(source, Path(dest) / page)))
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--student", type=Path, help="folder for the student versions")
    parser.add_argument(
        "--instructor", type=Path, help="folder for the instructor versions and course pages"
    )
    args = parser.parse_args(argv)
    if args.student is None and args.instructor is None:
        print("error: give --student DIR, --instructor DIR or both", file=sys.stderr)
        return 2
    try:
        if args.student is not None:
            print(f"{len(write_student(args.student))} student quizzes in {args.student}")
        if args.instructor is not None:
            print(f"{len(write_instructor(args.instructor))} files in {args.instructor}")
    except QuizError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
