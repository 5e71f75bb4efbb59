"""The package stays small as a whole: transformer_lib without its exercise checkers and its
speed subpackage (fast/) holds at most BUDGET lines."""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lib"
BUDGET = 4500


def package_lines() -> dict:
    return {
        str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ("exercises", "fast")
    }


def test_the_package_fits_its_line_budget():
    lines = package_lines()
    total = sum(lines.values())
    print(f"transformer_lib (without exercises/ and fast/): {total} lines in {len(lines)} modules")
    assert total <= BUDGET, f"{total} lines, above the budget of {BUDGET}"
