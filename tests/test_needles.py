"""Masking's needle search (ledger_runtime/ledger/needles.py): the compiled one answers as Python's ``in`` does,
is built only into a private cache and loaded only as the build it says it is; without it, Python's serves."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_runtime.ledger import native, needles, redact
from ledger_runtime.ledger.needles import NATIVE_MIN_CHARS, Needles


def _compiled() -> needles._Library:
    """The compiled search of this machine (the tests' shared cache), or a skip that says why (CI requires it)."""
    lib = needles.library(build=True)
    if lib is None:
        why = needles.prepare()
        if os.environ.get("LEDGER_REQUIRE_COMPILED_HOOKS") == "1":
            pytest.fail(f"no compiled needle search, and CI requires one: {why}")
        pytest.skip(f"no compiled needle search on this machine: {why}")
    return lib


_SET = ("sk-", "gh", "AKIA", "uthorization:", "-----BEGIN", "ab", "aba", "bab", "key", "\x7f~")
_PARTS = [*_SET, "s", "k", "-", "a", "b", "A", "K", "I", "\n", "\x00", "é", "\udcff", "☃", "x" * 7, "g", "h"]


@given(st.lists(st.sampled_from(_PARTS), max_size=60).map("".join), st.integers(0, 2))
@settings(max_examples=400, deadline=None)
def test_the_compiled_search_finds_what_python_s_in_finds(text: str, where: int) -> None:
    """Over texts glued of the needles, their pieces, overlaps (aba, bab), NUL, characters past ASCII and a lone
    surrogate, padded past NATIVE_MIN_CHARS before, after or around: each needle is found exactly where ``in``
    finds it, at the text's first and last characters too."""
    _compiled()
    pad = "." * NATIVE_MIN_CHARS
    text = (pad + text, text + pad, pad + text + pad)[where]
    assert Needles(_SET).present(text) == tuple(n for n in _SET if n in text)
    assert Needles(_SET).present(text[: NATIVE_MIN_CHARS - 1]) is None  # short: the caller's ``in`` serves


def test_a_needle_at_the_very_end_and_one_longer_than_what_is_left() -> None:
    _compiled()
    pad = "." * NATIVE_MIN_CHARS
    n = Needles(("ab", "abc", "b."))
    assert n.present(pad + "ab") == ("ab",)
    assert n.present(pad + "abc") == ("ab", "abc")
    assert n.present("b." + pad) == ("b.",)
    assert n.present(pad + "a") == ()
    assert n.present("ab") is None


def _long(text: str) -> str:
    """``text`` made long enough for the compiled search, with a line of its own before and after."""
    filler = "x = 1\n" * (NATIVE_MIN_CHARS // 6 + 1)
    return filler + text + "\n" + filler


_SECRET_PARTS = [
    "password=",
    "token: ",
    "Key=",
    "AUTH_",
    "dsn=",
    "https://u:pa55word@host",
    "curl -u bob:",
    "://u:",
    "@",
]


@given(st.lists(st.sampled_from(_PARTS + _SECRET_PARTS), max_size=40).map("".join))
@settings(max_examples=300, deadline=None)
def test_a_long_output_masks_alike_with_either_search(text: str) -> None:
    """The spans of a long text are the same with the compiled search as with Python's (token shapes and the
    words that name a secret, in upper and lower case)."""
    _compiled()
    r = redact.Redactor.for_run({"API_TOKEN": "hunter2hunter2"})
    text = _long(text)
    with_c = r.spans(text)
    os.environ[needles.MODE_ENV] = "python"
    try:
        assert needles.library() is None
        assert r.spans(text) == with_c
    finally:
        del os.environ[needles.MODE_ENV]


def test_each_credential_shape_in_a_long_output_is_masked_by_the_compiled_search() -> None:
    _compiled()
    r = redact.Redactor.for_run({})
    jwt = "eyJ" + "j" * 10 + "." + "k" * 10 + "." + "m" * 10
    for shape in ("AKIA0123456789ABCDEF", "sk-" + "a1" * 12, "ghp_" + "b2" * 16, jwt):
        text = _long(f"found {shape} here")
        masked = r.mask(text)
        assert shape not in masked and "*" * 10 in masked and len(masked) == len(text), shape
    assert "hunter2" not in r.mask(_long("DB_PASSWORD=hunter2hunter2"))


def test_every_credential_shape_in_a_long_output_is_masked_as_in_a_short_one() -> None:
    """Each of the credential shapes the ledger masks (test_secret_shapes.SHAPES: a password in a URL, whose
    opening is the one character ':', ``curl -u``, ``mysql -p``, webhooks...), in an output long enough for the
    compiled search, is masked as in a short one."""
    from test_secret_shapes import SHAPES

    _compiled()
    r = redact.Redactor.for_run({})
    for name, text, secret in SHAPES:
        long = _long(text)
        assert needles.library() is not None and len(long) >= NATIVE_MIN_CHARS
        assert secret not in r.mask(long), name
        assert r.mask(long) == _long(r.mask(text)), name


def test_a_fault_in_looking_for_the_compiled_search_leaves_python_s_serving(tmp_path: Path, monkeypatch) -> None:
    """A cache on a full or read-only disk (no room for the build's directory), or a Python without ctypes: the
    run starts and masks as ever, Python's search serving."""
    cache = _cache(tmp_path, monkeypatch)
    cache.mkdir(mode=0o700)

    def no_room(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(native.tempfile, "mkdtemp", no_room)
    assert needles.prepare() == f"python: no room to build in {cache}: Read-only file system"
    text = _long("token sk-" + "a1" * 12)
    assert "a1a1" not in redact.Redactor.for_run({}).mask(text)
    monkeypatch.undo()
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path / "other"))
    monkeypatch.setitem(__import__("sys").modules, "ctypes", None)  # a Python built without it
    assert needles.prepare().startswith("python: ")
    assert "a1a1" not in redact.Redactor.for_run({}).mask(text)


def test_masking_never_waits_for_a_build_under_way(tmp_path: Path, monkeypatch) -> None:
    """While a build holds the search's lock (a run's start builds it on a thread of its own), a long output is
    masked at once, by Python's search: masking in a hook server's threads never waits for a compiler."""
    _cache(tmp_path, monkeypatch)
    text = _long("token sk-" + "a1" * 12)
    with needles._lock:  # a build under way
        assert Needles(("sk-",)).present(text) is None
        assert "a1a1" not in redact.Redactor.for_run({}).mask(text)


def _cache(tmp_path: Path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(native.CACHE_ENV, str(cache))
    monkeypatch.delenv(needles.MODE_ENV, raising=False)
    return cache


def test_a_build_is_private_and_loaded_again_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    if native.find_compiler(os.environ) is None:
        pytest.skip("no C compiler on this machine")
    cache = _cache(tmp_path, monkeypatch)
    assert needles.prepare() == "compiled"
    (built,) = cache.glob("ledger-needles-*.so")
    assert stat.S_IMODE(os.stat(built).st_mode) == 0o700 and stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert not [p for p in cache.iterdir() if p.name.startswith(".build-")]  # its work directory is gone
    lib, why = needles.find_library(os.environ, build=False)
    assert lib is not None and why == "cached"


def test_a_library_others_could_write_or_of_another_build_is_not_loaded(tmp_path: Path, monkeypatch) -> None:
    if native.find_compiler(os.environ) is None:
        pytest.skip("no C compiler on this machine")
    cache = _cache(tmp_path, monkeypatch)
    assert needles.prepare() == "compiled"
    (built,) = cache.glob("ledger-needles-*.so")
    os.chmod(built, 0o722)
    assert needles.find_library(os.environ, build=False) == (None, needles.NOT_BUILT)
    os.chmod(built, 0o700)
    key = built.name[len("ledger-needles-") : -len(".so")]
    other = cache / f"ledger-needles-{'0' * len(key)}.so"
    os.rename(built, other)  # a library that says it is another build than its name's
    monkeypatch.setattr(needles, "library_key", lambda source, machine: "0" * len(key))
    assert needles.find_library(os.environ, build=False) == (None, needles.NOT_BUILT)


def test_without_a_compiler_python_s_search_serves_and_the_failure_is_kept(tmp_path: Path, monkeypatch) -> None:
    cache = _cache(tmp_path, monkeypatch)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert needles.prepare() == "python: no C compiler: $CC, cc, gcc or clang"
    monkeypatch.setenv("CC", "false")
    lib, why = needles.find_library(os.environ, build=True)
    assert lib is None and "false failed (exit 1)" in why
    (marker,) = cache.glob("ledger-needles-*.failed")
    assert stat.S_IMODE(os.stat(marker).st_mode) == 0o600
    assert "tried again an hour after" in needles.find_library(os.environ, build=True)[1]
    # and masking is as right as ever
    text = _long("token sk-" + "a1" * 12)
    assert needles.library() is None and "a1a1" not in redact.Redactor.for_run({}).mask(text)


def test_python_s_search_serves_where_the_setting_says(monkeypatch) -> None:
    monkeypatch.setenv(needles.MODE_ENV, "python")
    assert needles.prepare() == f"python: {needles.MODE_ENV}=python"
    assert needles.library(build=True) is None


def test_needles_the_search_cannot_take_are_refused() -> None:
    for bad in (("a",), ("ok", "é!"), tuple(f"n{i}" for i in range(needles.MAX_NEEDLES + 1))):
        with pytest.raises(ValueError):
            Needles(bad)
