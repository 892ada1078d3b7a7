"""Result CSVs read back into the records they were written from, whatever the names hold."""

from __future__ import annotations

import io

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra_pipe.results.csvtext import frame_csv, quote_bare_cr, rows_csv

CELLS = st.text(st.sampled_from(["a", ",", '"', "\r", "\n", " ", "ü"]), max_size=6)


def _read(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)


def test_a_lone_carriage_return_is_quoted():
    """Python 3.11's writer leaves "\r" bare with a "\n" terminator; pandas then splits the record."""
    df = pd.DataFrame({"workload": ["\r", "x"], "n": ["1", "2"]}, dtype=str)
    assert frame_csv(df) == 'workload,n\n"\r",1\nx,2\n'
    assert _read(frame_csv(df))["workload"].tolist() == ["\r", "x"]


def test_text_without_carriage_returns_is_unchanged():
    text = 'a,b\n"x,y","q""r"\n'
    assert quote_bare_cr(text) is text


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(CELLS, CELLS), min_size=1, max_size=5))
def test_frames_and_rows_round_trip(cells):
    df = pd.DataFrame(cells, columns=["campaign", "workload"], dtype=str)
    back = _read(frame_csv(df))
    assert back.values.tolist() == [list(c) for c in cells]
    rows = [{"campaign": a, "workload": b} for a, b in cells]
    assert rows_csv(rows, ("campaign", "workload")) == frame_csv(df)
