"""Customer text as the analyst sees it, and what had to be undone to read it so.

A message can look like "refund ORD-32011" on the analyst's screen while its characters say something else: a
zero-width space inside a word, a Cyrillic е or О for a Latin e or O, full-width letters, digits of another script.
The cues and the arguments read the text as it looks (``unmask``), so a disguised request still gets its card; the
card says it was disguised, and its approval goes to the highest role (``vigil.actions.facts``).

What is undone, in this order:

1. format characters (Unicode category Cf: zero-width spaces and joiners, soft hyphens, bidirectional controls,
   tag characters) are removed; removing one counts as disguise when it stood next to an ASCII letter or digit, or
   when it reorders or hides text (bidirectional controls, tags), not when it joins an emoji sequence or Persian
   letters;
2. NFKC: full-width and styled letters and digits become ASCII (counted), spaces and typographic marks their plain
   forms (not counted: a non-breaking space or "…" disguises nothing);
3. digits of other scripts (Arabic-Indic ٥) become ASCII digits, at their value (counted);
4. letters of other scripts that look like Latin ones are folded to them, after Unicode's confusables (UTS #39,
   ``_LOOKALIKE``), in a word that mixes them with Latin letters or digits, or in a message whose letters are all
   Latin or look-alike (counted); a word of real Russian or Greek is left as it is. A look-alike of O or I between
   digits reads as 0 or 1, as the analyst would read it;
5. look-alike hyphens (‐ ‑ ‒ −) between two letters or digits become "-", and so does an en dash (–) next to a
   digit (counted).

An ASCII "O" among digits stays a letter ("£5OO" is not an amount): nothing was disguised there.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import groupby

INVISIBLE = "had invisible characters inside words"
HIDDEN = "had hidden or reordering control characters"
STYLED = "used full-width or styled characters"
DIGITS = "used digits of another script"
LETTERS = "used letters of another script that look Latin"
HYPHENS = "used look-alike hyphens"

_LOOKALIKE: dict[str, str] = {
    source: latin
    for pairs in (
        # Derived from Unicode's confusables.txt (as the confusable_homoglyphs package ships it): the letters of
        # these scripts whose prototype is one ASCII letter. Greek Ι, Cyrillic І and Ӏ read as I (the table's
        # prototype, l, is what they are confused with in a skeleton, not what a reader sees).
        "ͿJΑAΒBΕEΖZΗHΙIΚKΜMΝNΟOΡPΤTΥYΧXαaγyιiνvοoρpσoυuϒYϜFϱpϲcϳjϹCϺMᴦr",  # Greek
        "ЅSІIЈJАAВBЕEКKМMНHОOРPСCТTУYХXЬbаaгrеeоoрpсcуyхxѕsіiјjѡwѴVѵvҮYүyһhҽeӀIӏlԁdԌGԛqԜWԝwꙇi",  # Cyrillic
        "ՍUՏSՕOաwգqզqհhոnռnսuցgքfօo",  # Armenian
        "ᎠDᎡRᎢTᎥiᎩYᎪAᎫJᎬEᎳWᎷMᎻHᎽYᏀGᏂhᏃZᏏbᏒRᏔWᏕSᏙVᏚSᏞLᏟCᏢPᏦKᏧdᏳGᏴBꭵiꮁrꮃwꮓzꮩvꮪsꮯc",  # Cherokee
        "ɑaɡgɩi",  # Latin letters outside European alphabets
    )
    for source, latin in zip(pairs[::2], pairs[1::2], strict=True)
}
"""Letters of another script, and the Latin letter each looks like."""
_AMONG_DIGITS = {"O": "0", "o": "0", "I": "1", "l": "1"}
_HYPHENS = frozenset("\u2010\u2011\u2012\u2043\u2212\u02d7")
_EN_DASH = "\u2013"
"""Read as a hyphen only next to a digit ("ORD–32101"); between words ("Mon–Fri") it is punctuation."""
_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_TYPOGRAPHIC = frozenset("\u2025\u2026")
_READ_SIGNS = frozenset("@-_$%+#")
"""Signs that change how an id, an e-mail address or an amount reads."""
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Unmasked:
    """``text`` as the analyst sees it, and ``disguise``: what had to be undone, in words (empty: nothing)."""

    text: str
    disguise: tuple[str, ...] = ()


def unmask(text: str) -> Unmasked:
    """``text`` as it looks: see the module docstring for what is undone and what counts as disguise."""
    if text.isascii():
        return Unmasked(text)
    found: dict[str, None] = {}
    text = _without_format_characters(text, found)
    text = _compatibility_forms(text, found)
    text = _ascii_digits(text, found)
    text = _latin_letters(text, found)
    text = _hyphens(text, found)
    return Unmasked(text, tuple(found))


def _without_format_characters(text: str, found: dict[str, None]) -> str:
    kept: list[str] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) != "Cf":
            kept.append(char)
            continue
        if char in _CONTROLS or 0xE0000 <= ord(char) <= 0xE007F:
            found[HIDDEN] = None
        elif char == "\ufeff" and index == 0:
            continue  # a byte-order mark left at the start by the sender's software
        elif _alnum_at(text, index - 1, -1) or _alnum_at(text, index + 1, 1):
            found[INVISIBLE] = None
    return "".join(kept)


def _alnum_at(text: str, index: int, step: int) -> bool:
    """Whether the first character at or beyond ``index`` (going ``step``) that is not a format character is an ASCII
    letter or digit (a zero-width non-joiner between Persian letters is spelling, not disguise)."""
    while 0 <= index < len(text) and unicodedata.category(text[index]) == "Cf":
        index += step
    return 0 <= index < len(text) and text[index].isascii() and text[index].isalnum()


def _compatibility_forms(text: str, found: dict[str, None]) -> str:
    normal = unicodedata.normalize("NFKC", text)
    if normal != unicodedata.normalize("NFC", text) and any(_styled(char) for char in text):
        found[STYLED] = None
    return normal


def _styled(char: str) -> bool:
    """A full-width or styled form of what makes up ids, e-mails and amounts: a letter or digit, or one of
    ``_READ_SIGNS`` (Ｏ, 𝐫, ＠, ＄); not a space, a typographic mark (…, ™) or the full-width punctuation of Chinese and
    Japanese text (！, ，, ：)."""
    if char.isascii() or char in _TYPOGRAPHIC:
        return False
    if not 0xFF00 <= ord(char) <= 0xFFEF and unicodedata.category(char)[0] in "ZSM":
        return False
    compatible = unicodedata.normalize("NFKC", char)
    if compatible == unicodedata.normalize("NFC", char):
        return False
    return any(c.isascii() and (c.isalnum() or c in _READ_SIGNS) for c in compatible)


def _ascii_digits(text: str, found: dict[str, None]) -> str:
    if not any(char.isdecimal() and not char.isascii() for char in text):
        return text
    found[DIGITS] = None
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() and not c.isascii() else c for c in text)


def _latin_letters(text: str, found: dict[str, None]) -> str:
    if not any(char in _LOOKALIKE for char in text):
        return text
    looks_latin = all(c.isascii() or c in _LOOKALIKE for c in text if c.isalpha())

    def fold(word: re.Match[str]) -> str:
        letters = word.group(0)
        if not any(c in _LOOKALIKE for c in letters):
            return letters
        latin_or_alike = all(c.isascii() or c in _LOOKALIKE for c in letters if c.isalpha())
        if not (latin_or_alike and (looks_latin or any(c.isascii() for c in letters))):
            return letters
        found[LETTERS] = None
        return _folded(letters)

    return _WORD.sub(fold, text)


def _folded(word: str) -> str:
    """``word`` with its look-alike letters folded; in a run of digits, a look-alike of O or I is a digit."""
    folded = [_LOOKALIKE.get(c, c) for c in word]
    digit_like = [c.isdigit() or (c in _LOOKALIKE and folded[i] in _AMONG_DIGITS) for i, c in enumerate(word)]
    for like_digits, run in groupby(range(len(word)), key=digit_like.__getitem__):
        indices = list(run)
        if like_digits and any(word[i].isdigit() for i in indices):
            for i in indices:
                if word[i] in _LOOKALIKE:
                    folded[i] = _AMONG_DIGITS[folded[i]]
    return "".join(folded)


def _hyphens(text: str, found: dict[str, None]) -> str:
    if not _HYPHENS.intersection(text) and _EN_DASH not in text:
        return text
    chars = list(text)
    for index, char in enumerate(text[1:-1], start=1):
        before, after = text[index - 1], text[index + 1]
        if not (before.isalnum() and after.isalnum()):
            continue
        if char in _HYPHENS or (char == _EN_DASH and (before.isdigit() or after.isdigit())):
            chars[index] = "-"
            found[HYPHENS] = None
    return "".join(chars)
