"""The flat-YAML reader (``readfile.flat_yaml``) reads exactly what PyYAML with our loader reads.

Why: ``simulate`` reads ASTRA-sim network files without importing PyYAML (start-up, issue #15); a
value read differently there (``010`` octal or ten, ``yes`` a bool or a word, ``1e3`` a number or a
string) would silently change a simulation. Whatever the flat reader accepts must equal PyYAML's
reading, value *and* type; whatever it is unsure of it must hand to PyYAML (return None).
"""

from __future__ import annotations

import yaml
from conftest import CONFORMANCE
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra_pipe.readfile import _yaml_loader, flat_yaml, read_yaml

# Tokens around every edge of the subset: YAML 1.1 words, octal/hex/underscored/base-60 numbers,
# exponents, signs, leading zeros, quotes and flow punctuation.
TRICKY = [
    "Ring",
    "Switch",
    "FullyConnected",
    "a_b",
    "0",
    "-0",
    "+1",
    "7",
    "010",
    "09",
    "0x1F",
    "1_000",
    "1:30",
    "1e3",
    "1.5e3",
    "1.5",
    "-0.0",
    "0.5",
    "01.5",
    ".5",
    "5.",
    ".inf",
    "inf",
    "NaN",
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "true",
    "False",
    "null",
    "~",
    "'x'",
    '"Ring"',
    "a b",
    "a:b",
    "a#b",
    "2001-12-14",
    "<<",
    "=",
    "{a: 1}",
    "",
]
KEYS = ["topology", "npus_count", "bandwidth", "latency", "yes", "on", "a-b", "k", "_x"]
scalar = st.one_of(st.sampled_from(TRICKY), st.integers(-(10**6), 10**6).map(str), st.floats(0, 1e6).map(repr))
value = st.one_of(
    scalar,
    st.lists(scalar, max_size=4).flatmap(
        lambda items: st.sampled_from([f"[{', '.join(items)}]", f"[ {' , '.join(items)} ]", f"[{','.join(items)},]"])
    ),
)
line = st.one_of(
    st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from([": ", ":  ", ":", " : ", "  "]),
        value,
        st.sampled_from(["", "  # c", "#c", " "]),
    ).map("".join),
    st.sampled_from(["", "# comment", "  ", "---", "\t", "  indented: 1", "- 1"]),
)


def _pyyaml(text: str):
    try:
        return ("ok", yaml.load(text, Loader=_yaml_loader()))
    except (yaml.YAMLError, ValueError) as exc:
        return ("error", type(exc).__name__)


def _typed(value):
    """``value`` with every scalar's type spelled out: 1, 1.0 and True must not compare equal."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


@settings(max_examples=400, deadline=None)
@given(st.lists(line, min_size=1, max_size=6).map("\n".join))
def test_what_the_flat_reader_accepts_pyyaml_reads_the_same(text):
    flat = flat_yaml(text)
    if flat is not None:
        assert _pyyaml(text) == ("ok", flat)
        assert _typed(_pyyaml(text)[1]) == _typed(flat)


def test_ambiguous_or_unusual_documents_go_to_pyyaml():
    for text in (
        "npus_count: [010]",  # yaml-cpp: ten; YAML 1.1: octal -- the loader decides, not us
        "bandwidth: [1e3]",
        "flag: yes",
        "on: [1]",
        "a: 1\na: 2",  # a duplicate key: PyYAML's loader names it in its error
        "topology: []",
        "topology: [Ring]\r\nnpus_count: [8]",
        "topology: [Ring]\n  nested: 1",
        "---\ntopology: [Ring]",
        "",
        "# only a comment",
        "topology: ['Ring']",
        "npus_count: [" + "9" * 5000 + "]",  # past Python's digit limit: PyYAML's path says where
        "bandwidth: [1" + "0" * 400 + ".0]",  # overflows a double
        "a: [1] # x\rb: [2]\n",  # YAML's other line breaks end a comment: b is a key for PyYAML
        "# h\u2028b: [2]\na: [1]\n",
        "a: 1 # c\x85b: 2\n",
        "a: [1] # \x00\n",  # PyYAML refuses the NUL
    ):
        assert flat_yaml(text) is None, text


def test_network_files_read_the_same_both_ways(tmp_path):
    files = sorted(CONFORMANCE.rglob("*.yml"))
    assert files, f"no network files under {CONFORMANCE}"
    for path in files:
        text = path.read_text()
        assert flat_yaml(text) is not None, f"{path}: an ASTRA-sim network file should take the flat path"
        assert _typed(read_yaml(path)) == _typed(yaml.load(text, Loader=_yaml_loader())), path
    (tmp_path / "net.yml").write_text(
        "topology: [ Ring, Switch ]  # 2-D\nnpus_count: [ 4, 2 ]\nbandwidth: [ 50.0, 25 ]\n"
    )
    assert read_yaml(tmp_path / "net.yml") == {
        "topology": ["Ring", "Switch"],
        "npus_count": [4, 2],
        "bandwidth": [50.0, 25],
    }
