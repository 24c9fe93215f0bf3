"""Issue 27: which query stems a text's words begin with, found without compiling a pattern per stem.

A fresh process's first searches compiled a regular expression for nearly every word of theirs (each new question
brings new stems); the test by ``str.find`` must say exactly what those patterns said, on any text.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.retrieval.evidence import _SHORT_STEM, _SUFFIXES, _Finder, coverage, stem


def _pattern(s: str) -> re.Pattern[str]:
    """The form this test replaced: a stem at a word's start; a short one the whole word but for a suffix."""
    if len(s) > _SHORT_STEM:
        return re.compile(rf"(?<!\w){re.escape(s)}")
    return re.compile(rf"(?<!\w){re.escape(s)}(?:{'|'.join(_SUFFIXES)})?(?!\w)")


def _by_pattern(stems: list[str], text: str) -> set[str]:
    low = text.lower()
    return {s for s in stems if s and _pattern(s).search(low) is not None}


# Letters the stems are made of, suffix letters, word characters of other scripts, digits, the underscore and
# separators (punctuation, spaces, a non-breaking space, a combining mark): the places a word starts or ends.
_ALPHABET = "catsinglyedro" + "éßИ٣_9" + " .,-'\u00a0\u0301"
stems_st = st.lists(st.text(alphabet="catsinglyedro", min_size=1, max_size=6), min_size=1, max_size=5)


@settings(max_examples=600)
@given(stems=stems_st, text=st.text(alphabet=_ALPHABET, max_size=60))
def test_find_agrees_with_the_patterns(stems: list[str], text: str) -> None:
    assert _Finder(stems).present(text) == _by_pattern(stems, text)


@settings(max_examples=300)
@given(
    stems=stems_st,
    words=st.lists(
        st.sampled_from(["cats", "catalog", "cat_s", "_cat", "scat", "cat", "Cat's", "cating", "écat", "9cats"])
    ),
)
def test_find_agrees_on_words_built_from_the_stems(stems: list[str], words: list[str]) -> None:
    text = " ".join(words)
    assert _Finder(stems).present(text) == _by_pattern(stems, text)


def test_short_stems_need_the_whole_word_long_ones_its_start() -> None:
    assert _Finder(["cat"]).present("Two cats and a catalog") == {"cat"}
    assert _Finder(["cat"]).present("a catalog, scattered") == set()
    assert _Finder(["cat"]).present("the cat_s file") == set()  # the underscore is a word character
    assert _Finder(["cat", "authen"]).present("my_cat x_authenticated") == set()
    assert _Finder(["authen"]).present("Re-authentication failed") == {"authen"}
    assert _Finder(["authen"]).present("unauthenticated") == set()
    assert coverage(["failing", "login"], "The login failed again") == 1.0
    assert stem("failing") == stem("failed")
