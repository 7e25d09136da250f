"""The label rules (docs/protocol.md, "Labels"): what a campaign's labels, an open-domain
value and a candidate string must be. Labels are compared, hashed (item keys) and reported as
their exact code points, so every text is checked in one place."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from ldptel.client.errors import ParameterError


def check_domain(domain: object, *, stored: bool = False) -> list[str]:
    """The labels of an untrusted config: a list of distinct strings and, for a new config
    (not `stored`), each non-empty, free of control characters (NUL included) and in Unicode
    NFC. Labels are compared, hashed (item keys) and reported as their exact code points, so
    NFC and NFD spellings would be two labels; requiring NFC makes canonically equivalent
    labels impossible in one domain (docs/protocol.md, "Labels")."""
    if not isinstance(domain, list) or not all(isinstance(v, str) for v in domain):
        raise ParameterError("domain", "must be a list of strings")
    for i, label in enumerate(domain):
        if stored:
            try:
                label.encode("utf-8")
            except UnicodeEncodeError as error:
                raise ParameterError("domain", f"label {i} has an unpaired surrogate") from error
        else:
            check_label(label, "domain", f"label {i}")
    if len(set(domain)) != len(domain):
        raise ParameterError("domain", "values must be distinct")
    return domain


def check_label(text: str, field: str, what: str = "value") -> int:
    """The label rules (docs/protocol.md, "Labels") for one text: valid Unicode, non-empty,
    no control character, NFC; raises ParameterError on `field`, else returns the length of
    its UTF-8 form. Campaign labels, open-domain values and candidates all keep them."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ParameterError(field, f"{what} has an unpaired surrogate") from error
    if not text:
        raise ParameterError(field, f"{what} is empty")
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise ParameterError(field, f"{what} holds a control character (NUL...)")
    if unicodedata.normalize("NFC", text) != text:
        raise ParameterError(field, f"{what} is not in Unicode NFC form")
    return size


def check_candidates(texts: Iterable[str], field: str = "candidates") -> list[str]:
    """Candidate strings of an open-domain report: each in NFC (so that it has the item key
    clients report it under, CampaignConfig.open_value) and keeping the label rules,
    duplicates dropped, order kept; raises ParameterError on `field` naming the entry."""
    checked: dict[str, None] = {}
    for i, text in enumerate(texts):
        normalized = unicodedata.normalize("NFC", text)
        check_label(normalized, field, f"entry {i + 1}")
        checked[normalized] = None
    return list(checked)
