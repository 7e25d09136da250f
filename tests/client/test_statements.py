"""Every privacy sentence is written once (ldptel.client.statements), and the docs quote each
template word for word, so the documents and the reports say the same thing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ldptel.client import statements
from ldptel.client.statements import render

DOCS = Path(__file__).resolve().parents[2] / "docs"


def quoted(path: Path) -> str:
    """The document's text with blockquote marks and line breaks folded to single spaces."""
    text = re.sub(r"^> ?", "", path.read_text(), flags=re.MULTILINE)
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("name", "document"),
    [
        ("LOCAL", "client.md"),
        ("WINDOW", "client.md"),
        ("LIFETIME_PURE", "client.md"),
        ("LIFETIME_COMPOSED", "client.md"),
        ("CENTRAL", "aggregator.md"),
        ("CENTRAL_NONE", "aggregator.md"),
        ("CENTRAL_LIFETIME", "aggregator.md"),
    ],
)
def test_the_docs_quote_every_template(name: str, document: str) -> None:
    template = getattr(statements, name)
    assert " ".join(template.split()) in quoted(DOCS / document)


def test_every_sentence_names_its_adversary_and_its_delta() -> None:
    for name in ("LOCAL", "WINDOW", "LIFETIME_PURE", "CENTRAL", "CENTRAL_LIFETIME"):
        template = getattr(statements, name)
        assert template.startswith("Against ")
        assert "delta" in template
    assert "replace-one" in statements.CENTRAL and "for n = {n} users" in statements.CENTRAL


def test_numbers_are_rendered_to_three_digits_and_counts_with_separators() -> None:
    words = render(statements.CENTRAL, epsilon=0.0152841, delta=1e-6, n=100_000)
    assert "(0.0153, 1e-06)-differentially private, for n = 100,000 users" in words
