"""Datasets: the four formats, ids, scripted replies, bounds, and problems with their line."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from awf_nb.errors import DefinitionError, UserError
from awf_nb.evals.datasets import Case, cases_from_rows, load_dataset


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "d.jsonl",
            '{"id": "a", "goal": "bread"}\n\n{"goal": "yeast", "replies": ["hi", "exit"]}\n',
        ),
        ("d.csv", 'id,goal,replies\na,bread,\n,yeast,"[""hi"", ""exit""]"\n'),
        ("d.json", '[{"id": "a", "goal": "bread"}, {"goal": "yeast", "replies": ["hi", "exit"]}]'),
        ("d.yaml", "- {id: a, goal: bread}\n- goal: yeast\n  replies: [hi, exit]\n"),
    ],
)
def test_every_format_gives_the_same_cases(tmp_path: Path, name: str, text: str) -> None:
    cases = load_dataset(write(tmp_path, name, text))
    assert [c.id for c in cases] == ["a", "2"]
    assert [c.row["goal"] for c in cases] == ["bread", "yeast"]
    assert cases[0].replies in (None, ())  # a CSV's empty cell is no message
    assert cases[1].replies == ("hi", "exit")


def test_bad_rows_are_all_reported_with_their_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "d.jsonl",
        '{"id": "a"}\n[1, 2]\n{"id": "a"}\n{"id": true}\n{"replies": "hi"}\n{broken\n',
    )
    with pytest.raises(DefinitionError) as caught:
        load_dataset(path, label="d.jsonl")
    found = [str(p) for p in caught.value.problems]
    assert found == [
        "d.jsonl:2: error: line 2: a row must be a map of columns, got list",
        'd.jsonl:3: error: line 3: case id "a" is used twice (first at line 1); ids are unique',
        "d.jsonl:4: error: line 4: id must be text or a whole number, got bool",
        "d.jsonl:5: error: line 5: replies must be a list of messages (text)",
        "d.jsonl:6: error: line 6: not JSON (Expecting property name enclosed in double quotes)",
    ]


def test_csv_problems_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "d.csv", 'id,goal\na,bread\nb\nc,x,"y"\n')
    with pytest.raises(DefinitionError) as caught:
        load_dataset(path, label="d.csv")
    assert [str(p) for p in caught.value.problems] == [
        "d.csv:3: error: line 3: 1 values for 2 columns",
        "d.csv:4: error: line 4: 3 values for 2 columns",
    ]


def test_the_bounds_are_errors_that_name_the_setting(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", "".join(f'{{"n": {i}}}\n' for i in range(5)))
    with pytest.raises(DefinitionError, match=r"more than 3 rows \(dataset.max_rows\)"):
        load_dataset(path, max_rows=3)
    with pytest.raises(UserError, match=r"larger than 10 bytes \(dataset.max_bytes\)"):
        load_dataset(path, max_bytes=10)
    assert len(load_dataset(path, max_rows=5)) == 5


def test_unknown_format_missing_file_and_empty_dataset(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"unknown format \.txt"):
        load_dataset(write(tmp_path, "d.txt", "x"))
    with pytest.raises(UserError, match=r"dataset .* not found"):
        load_dataset(tmp_path / "none.jsonl")
    with pytest.raises(DefinitionError, match="the dataset has no rows"):
        load_dataset(write(tmp_path, "e.jsonl", "\n"))


def test_a_fifo_as_the_dataset_is_refused_without_waiting_on_it(tmp_path: Path) -> None:
    """Opening a FIFO waits for a writer: it is refused before it is opened."""
    fifo = tmp_path / "cases.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError) as caught:
        load_dataset(fifo, label="cases.jsonl")
    assert str(caught.value) == (
        "cannot read dataset cases.jsonl: not a regular file (it is a named pipe (FIFO), "
        "whose reading waits for a writer)"
    )


def test_rows_from_python_and_from_a_data_frame_like_object() -> None:
    class Frame:  # what pandas offers, without pandas
        def to_dict(self, orient: str) -> list[dict[str, object]]:
            assert orient == "records"
            return [{"id": 7, "goal": "g"}]

    assert cases_from_rows([{"goal": "a"}, {"goal": "b"}])[1].id == "2"
    assert cases_from_rows(Frame())[0].id == "7"
    with pytest.raises(UserError, match="a list of dicts or a data frame"):
        cases_from_rows("rows.jsonl")


def test_a_case_id_never_names_a_path_outside_its_folder() -> None:
    assert Case("../etc/passwd").file_stem == "..%2Fetc%2Fpasswd"
    assert Case("a b").file_stem == "a%20b"
    assert Case("ok_id-1.x").file_stem == "ok_id-1.x"


def test_a_long_file_stem_is_cut_at_a_whole_escape_and_ends_with_a_hash() -> None:
    stems = {Case("面" * n + tail).file_stem for n in (150, 199) for tail in ("a", "b")}
    assert len(stems) == 4  # one file per id
    for stem in stems:
        assert len(stem) <= 200 and stem.count("~") == 1
        kept, digest = stem.split("~")
        assert len(digest) == 16 and re.fullmatch(r"(%[0-9A-F]{2})+", kept)
    assert Case("x" * 200).file_stem == "x" * 200  # short enough: unchanged


@pytest.mark.parametrize("depth", [101, 100_000])
def test_json_nested_too_deep_is_a_located_error(tmp_path: Path, depth: int) -> None:
    deep = '{"id": "x", "v": ' + "[" * depth + "]" * depth + "}"
    jsonl = write(tmp_path, "d.jsonl", '{"id": "a"}\n' + deep + "\n")
    with pytest.raises(DefinitionError) as caught:
        load_dataset(jsonl, label="d.jsonl")
    assert [str(p) for p in caught.value.problems] == [
        "d.jsonl:2: error: line 2: not JSON (nesting deeper than 100 levels)"
    ]
    whole = write(tmp_path, "d.json", '[{"id": "a"},\n' + deep + "]")
    with pytest.raises(DefinitionError) as caught:
        load_dataset(whole, label="d.json")
    assert [str(p) for p in caught.value.problems] == [
        "d.json:2: error: not JSON (nesting deeper than 100 levels)"
    ]
