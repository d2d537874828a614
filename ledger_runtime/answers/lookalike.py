"""Text a reader could take for the ledger's own words: ``mistakable``.

The ledger's lines begin ``[ledger``, ``(Ledger runtime`` or ``<ledger_``. An output that prints such
a line (a file of saved answers, a log of an earlier run, a crafted file) could pass for a reference
or a note; such an output is shown as printed under a line that says so, and is never the source of
a reference (answers/build.py ``AS_PRINTED``). What a reader sees is what counts, not the code
points: the opening is found in any case, behind colour codes, carriage returns or blanks, in
full-width and other compatibility forms, with accents or invisible characters between its letters,
and with letters of other scripts that look like Latin ones (a Cyrillic ``е`` in ``ledger``).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Where the ledger's own words could be read in an output: a line that begins (after blanks) as one of
# the ledger's lines does ("[ledger] NUDGE", "[ledger: same as", "(Ledger runtime:", "<ledger_update"),
# or a reference's opening anywhere.
LEDGER_LIKE = re.compile(r"(?i)\[ledger|\(ledger runtime|</?ledger_")

# Letters of other scripts that read as Latin ones (Unicode's confusables, the common part), and
# brackets that read as ``[``, ``(`` and ``<``: mapped to what they look like before the search.
_LOOKS_LIKE = {
    # Cyrillic
    "а": "a", "в": "b", "г": "r", "д": "d", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
    "к": "k", "л": "l", "м": "m", "н": "h", "о": "o", "п": "n", "р": "p", "с": "c", "т": "t", "у": "y",
    "х": "x", "ь": "b", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ց": "g",
    "А": "A", "В": "B", "Е": "E", "Ё": "E", "І": "I", "Ј": "J", "К": "K", "М": "M", "Н": "H", "О": "O",
    "Р": "P", "С": "C", "Т": "T", "Х": "X", "Ѕ": "S", "Ԁ": "D", "Ӏ": "l", "Ԍ": "G", "Г": "r",
    # Greek
    "α": "a", "β": "b", "γ": "y", "δ": "d", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "l", "Κ": "K",
    "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Armenian, Cherokee, Latin small capitals and other letters
    "ո": "n", "ս": "u", "օ": "o", "հ": "h", "ɩ": "l", "ǀ": "l", "ı": "i", "ȷ": "j", "ʟ": "l", "ᴅ": "d",
    "ᴇ": "e", "ɢ": "g", "ʀ": "r", "ɪ": "i", "ᴜ": "u", "ɴ": "n", "ᴍ": "m", "ᴛ": "t", "Ꮮ": "L", "Ꭼ": "E",
    "Ꭰ": "D", "Ᏻ": "G", "Ꮢ": "R", "ℓ": "l", "ɗ": "d", "ɖ": "d", "ǥ": "g", "ɼ": "r", "ꭇ": "r", "ᴦ": "r",
    # brackets
    "⁅": "[", "❲": "[", "〔": "[", "【": "[", "〚": "[", "⟦": "[", "❨": "(", "❪": "(", "⸨": "(",
    "‹": "<", "\u2329": "<", "\u3008": "<", "⟨": "<", "ᐸ": "<", "˂": "<",
}  # fmt: skip
_TABLE = str.maketrans(_LOOKS_LIKE)
# the word in the place of "ledger" after an opening: six letters of any script
_OPENING_WORD = re.compile(r"[\[(<]/?\s*([\w|]{6})")
WORD = "ledger"
# "[Iedger", "[1edger", "[|edger": an l that an ASCII character stands in for
_ASCII_LOOKALIKE = re.compile(r"[\[(<]/?\s*[I1|][Ee][Dd][Gg][Ee][Rr]")


@lru_cache(maxsize=1)
def _invisible() -> dict[int, None]:
    """Format characters (zero-width, bidi marks, BOM): not seen, so not there (built on first need)."""
    return dict.fromkeys(c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")


def skeleton(text: str) -> str:
    """``text`` as a reader sees it: invisible characters gone, compatibility forms folded (NFKC),
    accents dropped (NFKD, less the combining marks) and letters that look like Latin ones mapped."""
    text = unicodedata.normalize("NFKD", text.translate(_invisible()))
    text = "".join(c for c in text if not unicodedata.combining(c))
    return unicodedata.normalize("NFKC", text).translate(_TABLE)


def _reads_as_ledger(word: str) -> bool:
    """A six-letter word that reads as "ledger": each letter is its letter (in any case) or a letter
    of no script the reader can be sure of (not ASCII), and at least two are its letters exactly."""
    same = 0
    for c, want in zip(word.lower(), WORD):
        if c == want or (want == "l" and c in "i1|"):  # "Iedger": a capital I reads as an l
            same += 1
        elif c.isascii():
            return False
    return same >= 2


def mistakable(output: str) -> bool:
    """Whether an output holds text a reader could take for the ledger's own (see the module docstring)."""
    if _last and _last[0][0] is output:  # a step asks of its output several times
        return _last[0][1]
    if output.isascii():  # every form it looks for holds "edger", in some case: ``in`` rules most out at once
        low = output.lower()
        found = "edger" in low and (
            ("ledger" in low and LEDGER_LIKE.search(output) is not None) or _ASCII_LOOKALIKE.search(output) is not None
        )
    else:
        seen = skeleton(output)
        found = (
            LEDGER_LIKE.search(output) is not None
            or LEDGER_LIKE.search(seen) is not None
            or any(_reads_as_ledger(m.group(1)) for m in _OPENING_WORD.finditer(seen))
        )
    _last[:] = [(output, found)]
    return found


_last: list[tuple[str, bool]] = []


__all__ = ["mistakable", "skeleton", "LEDGER_LIKE"]
