"""What every section of the settings shares: the error that names its key, and the checks of a value.

A room with settings owns a frozen dataclass ``Section`` whose fields are its ``[ledger.<name>]`` keys, each with a
``check`` that converts a value or says what it expected. ``flat`` maps older files' names (``dedupe_min_lines``) to
fields, so those files still load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Callable, ClassVar


class ConfigError(ValueError):
    """A config file or value the runtime cannot use; the message names the key."""


class SettingError(ConfigError):
    """One setting a section refuses, named in its sectioned form, and why."""

    def __init__(self, section: str, key: str, detail: str):
        self.section, self.key, self.detail = section, key, detail
        super().__init__(f"{dotted(section, key)}: {detail}")


def dotted(section: str, key: str) -> str:
    """A setting's sectioned name: ``ledger.dedupe.min_lines``; ``ledger.inform`` at the top."""
    return ".".join(["ledger", *(part for part in (section, key) if part)])


class Invalid(ValueError):
    """A value a check refuses; the text is what was expected."""


@dataclass(frozen=True)
class Check:
    """What a key takes, said as ``expected`` in an error, and the conversion to it (None: refused)."""

    expected: str
    convert: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        converted = self.convert(value)
        if converted is None:
            raise Invalid(self.expected)
        return converted


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


EXACT_FLOAT = 2.0**53  # every whole number up to it is a float exactly


def whole(value: Any) -> int | None:
    """``value`` as a whole number: an int, or a float that is one (``2.0``, as TOML and YAML write it); else None.
    A float past ``EXACT_FLOAT`` is not: ``1e300`` is a whole float, but not the number written (int(1e300) is
    1000000000000000052504760255204420248704...), so it would be taken, and shown, as one the user never wrote."""
    if _is_int(value):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_FLOAT:
        return int(value)
    return None


def integer(minimum: int = 0) -> Check:
    """A whole number, ``minimum`` or more."""

    def convert(v: Any) -> int | None:
        n = whole(v)
        return n if n is not None and n >= minimum else None

    return Check(f"an integer >= {minimum}", convert)


def number(*, above: float | None = None, at_least: float | None = None, infinite: bool = False) -> Check:
    """A number above ``above`` or at least ``at_least``; ``inf`` only if ``infinite``, never NaN."""
    bound = f"> {above:g}" if above is not None else f">= {at_least:g}" if at_least is not None else ""
    said = f"a number {bound}".strip() + (" (inf: no bound)" if infinite else "")

    def convert(v: Any) -> float | None:
        if not (_is_int(v) or isinstance(v, float)) or math.isnan(v) or (math.isinf(v) and not infinite):
            return None
        if (above is not None and not v > above) or (at_least is not None and not v >= at_least):
            return None
        return float(v)

    return Check(said, convert)


BOOLEAN = Check("true or false", lambda v: v if isinstance(v, bool) else None)
TEXT = Check("a string", lambda v: v if isinstance(v, str) else None)
STRINGS = Check(
    "a list of strings",
    lambda v: list(v) if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v) else None,
)
TABLE = Check("a table", lambda v: dict(v) if isinstance(v, dict) else None)


def choice(kind: type[Enum]) -> Check:
    """One of an enum's words, or the enum itself."""

    def convert(v: Any) -> Enum | None:
        try:
            return kind(v)
        except ValueError:
            return None

    return Check(" or ".join(repr(k.value) for k in kind), convert)


def setting(default: Any, check: Check, *, factory: bool = False) -> Any:
    """A field of a section: its default and the check of what it is given."""
    if factory:
        return field(default_factory=default, metadata={"check": check})
    return field(default=default, metadata={"check": check})


def plain(value: Any) -> Any:
    """A value as a file gives it: an enum's word, not the enum."""
    return value.value if isinstance(value, Enum) else value


class Section:
    """The behaviour every section shares, mixed into a frozen dataclass; ``name`` is its table, "" for ``[ledger]``."""

    name: ClassVar[str] = ""
    flat: ClassVar[dict[str, str]] = {}
    whole: ClassVar[str] = ""  # a section whose table is one value (its keys are names: the policies)

    def __post_init__(self) -> None:
        """Checks and converts every key, so a section that exists is one its room can use."""
        for f in fields(self):  # type: ignore[arg-type]
            check = f.metadata.get("check")
            if check is None:
                continue
            value = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, check(value))
            except Invalid as e:
                raise self.refuse(f.name, f"expected {e}, got {value!r}") from None
        self.validate()

    def validate(self) -> None:
        """Checks that span keys or need the room's own parsing; raises ``SettingError``."""

    def refuse(self, key: str, detail: str) -> SettingError:
        """The error naming ``key``; a section that is one table is named itself."""
        return SettingError(self.name, "" if key == self.whole else key, detail)

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls) if "check" in f.metadata]  # type: ignore[arg-type]

    def table(self) -> dict[str, Any]:
        """The section's keys and their plain values: its TOML table."""
        if self.whole:
            return dict(getattr(self, self.whole))
        return {k: plain(getattr(self, k)) for k in self.keys()}
