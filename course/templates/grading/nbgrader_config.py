"""nbgrader's configuration of the course in this folder (README.md says how to use it).

Written by ``bash dev.sh course`` with the kit; nbgrader reads it from the folder it runs in.
"""

import os

from nbgrader.api import Gradebook
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    NbGraderPreprocessor,
    OverwriteCells,
    OverwriteKernelspec,
)

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = "autograde-skip"  # cells not run when grading


class GradableOnly(NbGraderPreprocessor):
    """Refuse a submission that lacks cells nbgrader grades: a notebook that is not the
    students' version (its nbgrader metadata stripped, a graded cell deleted or retyped).
    nbgrader alone would score it zero and carry on; this stops that student's grading with a
    message naming the file and the missing cells (nbgrader then exits with status 1).
    It also takes the tag autograde-skip off the answer and check cells: a check cell that
    does not run would score full marks."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if "nbgrader" in cell.metadata and SKIP in tags:
                cell.metadata["tags"] = [t for t in tags if t != SKIP]
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            wanted = {cell.name for cell in notebook.source_cells}
        have = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells}
        missing = sorted(wanted - have)
        if missing:
            message = (
                f"cannot grade submitted/{info['student']}/{info['assignment']}/"
                f"{info['notebook']}.ipynb: it lacks the graded cells {', '.join(missing)}. "
                "It is not the students' version of the notebook (or cells were deleted): "
                "ask the student to paste their answers into a fresh copy of "
                f"student/notebooks/{info['notebook']}.ipynb and submit that."
            )
            self.log.error(message)
            raise ValueError(message)
        return nb, resources


c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.root = HERE
c.CourseDirectory.course_id = "transformer-series"
# The students' version keeps the lesson's outputs (figures, printouts): the exercise cells'
# outputs are already cleared in source/, so generate_assignment does not clear the rest.
c.GenerateAssignment.preprocessors = [
    p
    for p in GenerateAssignment.class_traits()["preprocessors"].make_dynamic_default()
    if p is not ClearOutput
]
c.Autograde.sanitize_preprocessors = [
    GradableOnly,
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    OverwriteCells,
    CheckCellMetadata,
]
# Grade the exercises, not the lesson's long runs: cells tagged autograde-skip (the training
# runs of notebooks 07 and 09, and what needs their result) are not run when grading.
c.Execute.skip_cells_with_tag = SKIP
c.Execute.timeout = 300  # seconds a cell may run
# zip_collect: a file named STUDENT_NN_name.ipynb (anything between the two parts is ignored)
# is collected as submitted/STUDENT/NN_name/NN_name.ipynb
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r"^(?:.*[/\\])?(?P<student_id>[A-Za-z0-9.-]+)_(?:.*_)?(?P<file_id>\d\d_[A-Za-z_]+)\.ipynb$"
)
# the notebooks that load the shipped models find them in the kit's student folder
os.environ.setdefault(
    "TRANSFORMER_CHECKPOINTS", os.path.join(os.path.dirname(HERE), "student", "checkpoints")
)
