"""The keyword analyser: identifiers whole and in parts, plain words lower-cased and stemmed."""

from __future__ import annotations

import pytest

from memlane.store.analysis import query_terms, stem, terms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("src/app/main.py", ["src/app/main.py", "src", "app", "main", "py"]),
        ("parse_config_file", ["parse_config_file", "parse", "config", "file"]),
        ("loadUserProfile", ["loaduserprofile", "load", "user", "profile"]),
        ("HTTPServerError", ["httpservererror", "http", "server", "error"]),
        ("E1234", ["e1234"]),
        ("v2.3.1", ["v2.3.1", "v2", "3", "1"]),
        ("foo@bar.com", ["foo@bar.com", "foo", "bar", "com"]),
    ],
)
def test_identifiers_are_indexed_whole_and_as_parts(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_plain_words_are_lowered_stemmed_and_stopwords_dropped() -> None:
    assert terms("The parsers were Running") == ["parser", "runn"]
    assert terms("studies") == ["study"]
    assert terms("it is what it is") == []


def test_trailing_punctuation_is_not_part_of_a_term() -> None:
    assert terms("see main.py.") == ["see", "main.py", "main", "py"]
    assert terms("(config)") == ["config"]


def test_term_frequency_is_kept_but_query_terms_are_distinct() -> None:
    assert terms("bug bug bug") == ["bug", "bug", "bug"]
    assert query_terms("bug fix bug") == ["bug", "fix"]


def test_stem_leaves_short_words_names_and_double_s_alone() -> None:
    assert stem("bus") == "bus"
    assert stem("class") == "class"
    assert stem("classes") == "class"
    assert stem("parsed") == "pars"
    assert stem("x86_64s") == "x86_64s"


def test_query_and_document_agree_on_identifier_case() -> None:
    assert set(query_terms("LoadUserProfile")) <= set(terms("call loadUserProfile() now"))


@pytest.mark.parametrize(
    "text",
    [
        "Which file should I look at next, and why? Keep it short.",
        "bug fix bug LoadUserProfile src/app/main.py E1234 v2.3.1",
        "tabs\tand\u00a0no-break\u2003spaces, café naïve  running runs",
        "",
    ],
)
def test_query_terms_are_the_analysers_distinct_terms(text: str) -> None:
    """`query_terms` goes through the per-chunk memo: the same terms as the analyser, each
    once, in first occurrence order, and a list of the caller's own."""
    first = query_terms(text)
    assert first == list(dict.fromkeys(terms(text)))
    first.append("changed")
    assert query_terms(text) == list(dict.fromkeys(terms(text)))
