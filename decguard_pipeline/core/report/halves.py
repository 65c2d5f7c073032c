"""A big report decoded and checked in two processes: the pairs of its properties section
from a cut onwards by a forked child, everything else by this process (``report``).

Most of a ``test --all`` report is its pairs (92 of 97 MB for 5,000 cases), and decoding and
checking each pair needs nothing of the others'. So the document is cut between two pairs:
the child decodes the pairs after the cut (``[`` written over the comma before them, its own
copy of the page), this process decodes the document without them (a random string put in
their place), and each checks its own. The child answers with what the rest of the checks
need of its pairs (``pair_columns.HalfVerdict``: the hashes of their ids, their
summaries' figures, the failed ones), a few hundred kB.

Nothing here or in what the child runs imports pydantic (a test holds it to that), so the
``report`` command forks before importing anything of the verifier's (:func:`split_ahead`),
and checks its part without pydantic too (``struct_verify``) unless something does not
plainly hold.

The cut needs no parsing to find and is proven, not trusted. It is a ``,`` then ``{"id":``
(the comma before a pair) and, further on, ``], "skipped":`` (the end of the pairs): a ``"``
preceded by ``{`` or a space and followed by a letter can only open a string, so both sit
outside strings in a valid document. This process's part decodes only if it is a valid
document, and the random string (generated after the file was read, so the file cannot hold
it) must come back as the last pair: so the cut is inside the pairs array, between two of
its elements, and the child's part is those elements. The document is then exactly this
process's part with the child's pairs in place of the string.

Anything else (no cut, either part refused, a verdict the child does not give, the child
dead) and the report is loaded in one process, as always: the split finds nothing the single
process would not, and says nothing itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import pickle
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.json_limits import PARSER_DEPTH, ReadAhead
from decguard_pipeline.core.properties.limits import Limits
from decguard_pipeline.core.properties.typed_section import (
    TypedPair,
    TypedSection,
    failed_dicts,
    first_labels,
    nested_within,
    pairs_hold,
)
from decguard_pipeline.core.report import typed_records
from decguard_pipeline.core.result_structs import Shallow
from decguard_pipeline.core.results import CaseResults

# Below this, a second process costs more than it saves (fork, a second decoder, the
# verdict): the bench's 5,000-case report is 97 MB, a 500-case one 10 MB.
MIN_BYTES = 24 << 20
# The share of the document this process keeps: besides its pairs it decodes and checks the
# header and the results, computes the metrics and writes the text (the command's wall time
# at 0.40/0.46/0.48/0.50/0.52/0.54: 728/673/674/650/689/678 ms median, interleaved rounds)
OWN_SHARE = 0.50
PIPE_BYTES = 1 << 20  # Linux's most for a process without privileges (pipe-max-size)

Writable = bytearray | mmap.mmap  # a document's bytes, which may be written to

_CUT = re.compile(rb',\s*\{\s*"id"\s*:')
_END = re.compile(rb'\]\s*,\s*"skipped"\s*:')
_OTHER_PAIRS = msgspec.json.Decoder(list[TypedPair[Shallow]])  # type: ignore[valid-type]


class _Section(TypedSection[Shallow], forbid_unknown_fields=True, gc=False, kw_only=True):  # type: ignore[valid-type]
    pairs: list[TypedPair[Shallow] | str]  # type: ignore[valid-type]  # the last: the marker


class _Stored(typed_records._Stored[Shallow], forbid_unknown_fields=True, gc=False):  # type: ignore[valid-type]
    properties: _Section | msgspec.UnsetType | None = msgspec.UNSET


_OWN_PART = msgspec.json.Decoder(_Stored)


@dataclass(frozen=True)
class Cut:
    comma: int  # the comma before the child's first pair
    end: int  # the ``]`` that closes the pairs


def find_cut(raw: Writable, share: float) -> Cut | None:
    """Where to cut ``raw`` (see the module's docstring), the first pair from ``share`` of
    its bytes on going to the child; None: too small to pay, or no such place."""
    if len(raw) < MIN_BYTES:
        return None
    key = raw.rfind(b'"skipped"')
    if key < 0:
        return None
    end = None
    for match in _END.finditer(raw, max(0, key - 64), key + len(b'"skipped":') + 64):
        end = match.start()
    cut = _CUT.search(raw, int(len(raw) * share))
    if end is None or cut is None or cut.start() >= end:
        return None
    return Cut(cut.start(), end)


def can_fork() -> bool:
    """Whether a child may be forked here: Linux (macOS forks poorly with some libraries),
    two CPUs or more, and no other thread (:func:`one_thread`)."""
    return sys.platform.startswith("linux") and (os.cpu_count() or 1) >= 2 and one_thread()


def one_thread() -> bool:
    """Whether this process runs no other thread, Python's or a library's (a fork copies
    none of them, with whatever locks they hold). A thread just joined may take a moment to
    leave the kernel's list: asked again a few times."""
    if threading.active_count() != 1:
        return False
    for _ in range(_THREAD_CHECKS):
        try:
            if len(os.listdir("/proc/self/task")) == 1:
                return True
        except OSError:  # no /proc: Python's own count is all there is
            return True
        time.sleep(0.001)
    return False


_THREAD_CHECKS = 20


class OtherHalf:
    """The pairs from the cut onwards, decoded by a forked child, which checks them with
    what :meth:`send` gives it and answers with its :meth:`verdict`. The buffer is kept
    whole here, so :meth:`pairs` can decode them here too when something needs them."""

    def __init__(self, raw: Writable, cut: Cut) -> None:
        self._raw, self._cut = raw, cut
        self.rules: Rules | None = None  # the second message, when :func:`send_rules` sent it
        self._verdict: Any = None
        self._pid = -1
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        with contextlib.suppress(OSError, AttributeError):
            # room for the messages (a 5,000-case report's columns: 0.2 MB), so that this
            # process does not wait for the child to read them
            fcntl.fcntl(to_child, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        pid = os.fork()
        if pid == 0:
            os.close(to_child)
            os.close(from_child)
            _child(raw, cut, from_parent, to_parent)
        os.close(from_parent)
        os.close(to_parent)
        self._pid, self._from_child = pid, from_child
        self._to_child: BinaryIO | None = os.fdopen(to_child, "wb")

    def send(self, *message: Any) -> None:
        """The next of the two messages the child checks its pairs with: the arguments of
        ``typed_section.pairs_hold`` after the pairs (:func:`decode` sends them), then
        ``pair_columns.later_half_holds``'s (the enabled properties as ``limits.Limits``)."""
        if self._to_child is None:
            return
        try:
            pickle.dump(message, self._to_child, protocol=pickle.HIGHEST_PROTOCOL)
            self._to_child.flush()
        except OSError:  # the child is gone: its verdict will say so
            self._close_to_child()

    def _close_to_child(self) -> None:
        if self._to_child is not None:
            with contextlib.suppress(OSError):  # what was left unsent: the child is gone
                self._to_child.close()
            self._to_child = None

    def verdict(self) -> Any:
        """The child's ``pair_columns.HalfVerdict``, or None when its pairs do not plainly hold (or
        it gave no answer); waits for it (:meth:`close` reaps it, which waits for it to have
        freed its memory)."""
        if self._from_child >= 0:
            self._close_to_child()
            with os.fdopen(self._from_child, "rb") as source:
                data = source.read()
            self._from_child = -1
            try:
                self._verdict = pickle.loads(data) if data else None
            except Exception:  # a cut-short answer: no verdict
                self._verdict = None
        return self._verdict

    def pairs(self) -> list[TypedPair[Any]]:
        """The child's pairs, decoded here (the child decoded the same bytes)."""
        comma, end = self._cut.comma, self._cut.end
        self._raw[comma] = ord("[")
        try:
            return _OTHER_PAIRS.decode(memoryview(self._raw)[comma : end + 1])
        finally:
            self._raw[comma] = ord(",")

    def failed_dicts(self) -> list[dict[str, Any]]:
        """The child's failed pairs, as dicts (made here when it gave no verdict)."""
        verdict = self.verdict()
        if verdict is None:
            return failed_dicts(self.pairs())
        return verdict.failed  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the child if it still runs (its answer, if not read, is of no use), and
        reap it."""
        self._close_to_child()
        if self._from_child >= 0:
            os.close(self._from_child)
            self._from_child = -1
        if self._pid > 0:
            if os.waitpid(self._pid, os.WNOHANG) == (0, 0):
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            self._pid = -1


Split = tuple[typed_records.Decoded, OtherHalf]


def decode(raw: Writable) -> Split | None:
    """``typed_records.decode(raw)`` with the pairs from a cut onwards left to a child
    (:class:`OtherHalf`, sent the label set and tolerance to check them with), or None when
    it cannot be split (or either part is refused: the whole document then goes as
    always)."""
    cut = find_cut(raw, OWN_SHARE)
    if cut is None or not can_fork():
        return None
    # imported once, for both processes: the checks of the pairs
    from decguard_pipeline.core.properties import pair_columns  # noqa: F401

    other = OtherHalf(raw, cut)
    try:
        stored = _decode_own(raw, cut)
        if stored is None:
            other.close()
            return None
    except BaseException:
        other.close()
        raise
    decoded = typed_records.decoded(stored, shallow=True)
    section = decoded.header["properties"]  # a _Section: _decode_own found the marker in it
    other.send(first_labels(section.pairs), typed_records.stored_tolerance(decoded.header))
    return decoded, other


@dataclass(frozen=True)
class Rules:
    """What :func:`send_rules` sent the child to check its pairs against, made from the
    header as decoded; the verifier takes it only for the header it validates."""

    key: tuple[DecisionSpec, str, str]  # the decision, backend and provider it was made for
    limits: dict[str, Limits]  # of the enabled properties
    results: CaseResults  # the report's results, as ``typed_records.columns`` makes them


def send_rules(split: Split) -> None:
    """The child's second message (the enabled properties' limits and the original cases'
    columns), read with the settings' structs (``core.contract.settings_structs``), not
    their models; nothing when the header is not plainly what they need (the verifier sends
    it, once it has validated the header)."""
    from decguard_pipeline.core.contract.settings_structs import Properties, read
    from decguard_pipeline.core.properties.limits import limits_of
    from decguard_pipeline.core.properties.pairs import OriginalColumns

    decoded, other = split
    header = decoded.header
    # what the verifier checks first: no value deeper than a parser reads (the settings are
    # plain JSON values here, of any depth)
    if not nested_within(header["properties"], PARSER_DEPTH, shallow=True):
        return
    try:
        contract, backend = header["contract"], header["backend"]
        spec = DecisionSpec(contract["name"], contract["type"], tuple(contract["labels"]))
        key = (spec, backend["name"], backend["provider"])
        if not all(isinstance(v, str) for v in (spec.name, spec.type, *spec.labels, *key[1:])):
            return
        settings = read(header["properties"].config, Properties)
        if settings is None:  # not plainly settings: the verifier's models say what they are
            return
        enabled = settings.enabled()
        tolerance = typed_records.stored_tolerance(header)
        results = typed_records.columns(spec, key[1], key[2], decoded.records, tolerance)
    except (LookupError, TypeError, ValueError, RecursionError):
        return
    if results is None:
        return
    limits = {name: limits_of(config) for name, config in enabled.items()}
    other.send(limits, OriginalColumns.of(results))
    other.rules = Rules(key, limits, results)


@dataclass(frozen=True)
class Ahead:
    """A report split (or not) before the verifier was imported: :func:`split_ahead`."""

    split: Split | None


def split_ahead(read_ahead: ReadAhead) -> Ahead:
    """:func:`decode` of the report being read, for the ``report`` command before it imports
    the verifier, so that the child starts on its pairs at once (and :func:`send_rules`);
    not split when the read failed (``verify.load_report`` raises its error) or forking is
    not safe. The cyclic collector must be paused (the decoded
    report is millions of objects): ``collector.gc_paused`` around this and the load."""
    try:
        raw = read_ahead.result()
    except Exception:  # the verifier's to raise, worded
        return Ahead(None)
    split = decode(raw)
    if split is not None:
        send_rules(split)
    return Ahead(split)


def _decode_own(raw: Writable, cut: Cut) -> _Stored | None:
    """The document with a random string in place of the pairs from the cut onwards, if it
    decodes and the string is the last pair; ``raw`` as it was afterwards."""
    # ``secrets.token_hex(16)`` is this; the module imports hashlib and random (~8 ms, before
    # the fork)
    marker = os.urandom(16).hex()
    tail = bytes(raw[cut.end :])
    replaced = b',"' + marker.encode() + b'"' + tail
    saved = bytes(raw[cut.comma : cut.comma + len(replaced)])
    if len(saved) < len(replaced):
        return None  # the child's part is shorter than the string: too small to split
    raw[cut.comma : cut.comma + len(replaced)] = replaced
    try:
        stored = _OWN_PART.decode(memoryview(raw)[: cut.comma + len(replaced)])
    except (msgspec.DecodeError, RecursionError):
        return None
    finally:
        raw[cut.comma : cut.comma + len(saved)] = saved
    section = stored.properties
    if not isinstance(section, _Section) or not section.pairs or section.pairs[-1] != marker:
        return None
    section.pairs.pop()
    if str in set(map(type, section.pairs)):
        return None  # a string among the pairs themselves: refused, as one decoder would
    return stored


def _child(raw: Writable, cut: Cut, from_parent: int, to_parent: int) -> None:
    """The child: decode the pairs from the cut onwards, check them with what the parent
    sends, and answer with their verdict (or with nothing)."""
    try:
        from decguard_pipeline.core.properties.pair_columns import later_half_holds

        raw[cut.comma] = ord("[")  # this process's copy of the page only
        # refused (a value deeper than Shallow, say): no verdict, and the parent loads the
        # whole report, which finds whatever it is
        pairs = _OTHER_PAIRS.decode(memoryview(raw)[cut.comma : cut.end + 1])
        with os.fdopen(from_parent, "rb") as source:
            # each pair on its own as soon as the parent has the label set and tolerance,
            # then against the report's results (an EOF instead: no verdict is needed)
            held = pairs_hold(pairs, *pickle.load(source))
            if held is None:
                return
            verdict = later_half_holds(pairs, *pickle.load(source), held)
        with os.fdopen(to_parent, "wb") as out:
            pickle.dump(verdict, out, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # no verdict is an answer: the parent checks alone
        pass
    finally:
        os._exit(0)  # nothing of the parent's (atexit, buffers) runs twice
