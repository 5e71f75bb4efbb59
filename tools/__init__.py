"""The series' builders, one package: run them from the repository root with ``python -m``.

    python -m tools.build_course [--out build/course]    # bash dev.sh course
    python -m tools.site.build [--out build/site]         # bash dev.sh site
    python -m tools.mark_slides [--check] [NOTEBOOK ...]  # the slide marks of the notebooks

The modules import each other as ``tools.x``; the tests find the package through pytest's
``pythonpath`` option (pyproject.toml), so nothing edits ``sys.path``.

- ``output_folder``: the one safe way to (re)make a build's output folder
- ``mathjax_files``: the one MathJax (3, SVG output) shipped by the site and the slide decks
- ``build_course``: the instructor kit (the students' bundle, decks, plans, the nbgrader course)
- ``kit_base``: what the parts of the kit share (paths, ``BuildError``, reading a notebook and
  its exercises from nbgrader's cell metadata)
- ``grading``: the notebooks as an nbgrader course, whose ``generate_assignment`` makes the
  students' version of every notebook
- ``student_bundle``, ``student_setup``: the students' bundle and its ``start.py``
- ``answer_key``, ``quizzes``: the answer key (the answer cells and ``course/answer_notes.md``)
  and the quizzes
- ``course_slides``: the reveal.js decks (nbconvert, the ``course_reveal`` template)
- ``mark_slides``, ``slide_rules``, ``slide_screen``, ``slide_deck``, ``slide_pieces``: the
  slide marks, the per-cell rules and overrides behind them, the screen budget, a notebook made
  ready to be a deck, code cells cut for the slides
- ``handouts``: the PDF handouts of the decks and the students' notebooks
- ``chromium``: Debian's chromium, found once for the handouts and the browser tests
- ``site``: the offline web site of the series (``site/build.py``; the pages read from the
  notebooks, ``site/pages.py``)
"""
