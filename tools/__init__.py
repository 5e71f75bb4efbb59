"""The series' builders, one package: run them from the repository root with ``python -m``.

    python -m tools.build_course [--out build/course]    # bash dev.sh course
    python -m tools.site.build [--out build/site]         # bash dev.sh site
    python -m tools.mark_slides [--check] [NOTEBOOK ...]  # the slide marks of the notebooks

The modules import each other as ``tools.x``; the tests find the package through pytest's
``pythonpath`` option (pyproject.toml), so nothing edits ``sys.path``.

- ``output_folder``: the one safe way to (re)make a build's output folder
- ``mathjax_files``: the one MathJax (3, SVG output) shipped by the site and the slide decks
- ``build_course``: the instructor kit (student copies, slide decks, lesson plans, answer key)
- ``kit_base``: what the parts of the kit share (paths, ``BuildError``, reading a notebook)
- ``course_student``: a notebook's student copy (solutions removed)
- ``answer_key``: the answer key, from the solution cells and ``course/answer_notes.md``
- ``course_slides``: the reveal.js decks (nbconvert, the ``course_reveal`` template)
- ``mark_slides``, ``slide_rules``, ``slide_screen``, ``slide_deck``, ``slide_pieces``: the
  slide marks, the per-cell rules and overrides behind them, the screen budget, a notebook made
  ready to be a deck, code cells cut for the slides
- ``student_copy``: in the student copies, cells that answer an exercise below blanked
- ``quizzes``, ``student_bundle``, ``student_setup``: the quizzes, the students' bundle and
  its ``start.py``
- ``handouts``: the PDF handouts of the decks and the student notebooks
- ``chromium``: Debian's chromium, found once for the handouts and the browser tests
- ``grading``, ``grading_source``, ``grading_cells``, ``grading_hidden``,
  ``grading_hidden_use``: the notebooks as an nbgrader course (the config and README, each
  notebook's source version, its graded cells, the hidden tests)
- ``site``: the offline web site of the series (``site/build.py``; the pages read from the
  notebooks, ``site/pages.py``)
"""
