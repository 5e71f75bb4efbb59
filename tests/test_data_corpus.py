"""Parallel-corpus reader: good files, extra columns, CRLF/BOM, malformed lines named."""

import re

import pytest

from transformer_lib.data.corpus import read_parallel, write_parallel

GOOD = [("Go.", "Va !"), ("Hi.", "Salut !"), ("Ça va ?", "Wie geht's?"), ("Sí", "はい")]


def write(tmp_path, text, name="pairs.tsv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_good_file_round_trip(tmp_path):
    path = tmp_path / "good.tsv"
    write_parallel(path, GOOD)
    assert read_parallel(path) == GOOD
    assert read_parallel(str(path)) == GOOD


def test_extra_columns_blank_lines_crlf_and_bom(tmp_path):
    text = (
        "\ufeffGo.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\r\n"
        "\r\n"
        "  Hi. \t Salut !\t#1\t#2\r\n"
        "\n"
        "Ça va ?\tWie geht's?"
    )  # no trailing newline
    assert read_parallel(write(tmp_path, text)) == GOOD[:3]


@pytest.mark.parametrize(
    "bad_line, reason",
    [
        ("no tab on this line", "no tab"),
        ("\tonly a target", "source side is empty"),
        ("only a source\t", "target side is empty"),
        ("  \t  ", "source side is empty"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad_line, reason):
    path = write(tmp_path, f"Go.\tVa !\n\nHi.\tSalut !\n{bad_line}\nRun!\tCours !\n")
    with pytest.raises(ValueError) as info:
        read_parallel(path)
    message = str(info.value)
    assert str(path) in message and re.search(r"\bline 4\b", message) and reason in message


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Go.\tVa !\nCafé\tcoffee\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 2\b.*UTF-8"):
        read_parallel(path)


def test_empty_file(tmp_path):
    for text in ["", "\n\n  \n"]:
        with pytest.raises(ValueError, match="no 'source<TAB>target' line"):
            read_parallel(write(tmp_path, text))


def test_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="path"):
        read_parallel(42)
    with pytest.raises(FileNotFoundError):
        read_parallel(tmp_path / "missing.tsv")
    with pytest.raises(ValueError, match=r"pairs\[1\]"):
        write_parallel(tmp_path / "x.tsv", [("a", "b"), ("c\td", "e")])
    with pytest.raises(TypeError, match=r"pairs\[0\]"):
        write_parallel(tmp_path / "x.tsv", ["ab"])
