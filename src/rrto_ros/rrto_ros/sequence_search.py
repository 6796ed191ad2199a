# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
"""Two-stage Operator Sequence Search (OSS) of RRTO over a recorded operator log.

RRTO records every intercepted operator call of a model into a log and looks for the
repeating per-inference operator sequence (the IOS), so that a server can replay a whole
inference in one round trip. This module holds the log data model and the search, with no
I/O: other code records the entries; this code only reads them.

Data model. A log is a sequence of :class:`LogEntry`. Entry ``i`` of a log has the absolute
index ``base + i``; ``base`` is 0 for a whole log and grows when a bounded log drops its
oldest entries. ``INPUT`` entries (the HtoD analogue) bring a host tensor into the pass,
``OUTPUT`` entries (the DtoH analogue) read one value back to the host, and ``OP`` entries
run an operator remotely. Each entry produces the values identified by its own absolute
index and reads values through :class:`Ref`: a persistent parameter (``PARAM``), a literal
(``CONST``), or the value produced by an earlier entry (``VALUE``, keyed by that entry's
absolute index).

Search. :func:`find_sequence` implements the normative version of the search (spec section
4.4): ``l = e - s + 1`` with ``e`` the newest OUTPUT; start candidates are the INPUT indices
and the index after every older OUTPUT, tried in descending order, i.e. shortest period
first; a count of ``R`` means ``R`` back-to-back identical copies ending at the newest,
the window itself included; within a candidate the INPUT anchors ``s - l <= k <= s`` are
tried nearest first. Stage one (FASTCHECK) compares tag slices through prefix polynomial
hashes modulo the Mersenne prime ``2**61 - 1``, so it costs O(1) per comparison and O(L)
for the index; a hash equality is never trusted on its own, because stage two (FULLCHECK)
compares every entry exactly before anything is accepted.

Provenance (ENTRYEQ, CHECKDATADEPENDENCY). A VALUE read inside a window must come from an
earlier INPUT or OP of the same window, at the same relative offset in every copy, or be
resident state: a value produced before the oldest compared copy and read at the same
absolute index by every copy. A read of the previous pass's intermediate is therefore a
carried dependency and never matches.

Pruning. Besides FASTCHECK the search uses only necessary conditions, so it returns exactly
what the plain algorithm returns: a second prefix hash over entry fingerprints (kind, tag,
signature and the non-VALUE reads) rejects windows whose copies cannot be entry-equal; for
``R >= 2`` the anchors are limited to INPUTs right after an OUTPUT (a window whose copies
are identical and that ends at an OUTPUT is preceded by an OUTPUT); candidates with no
anchor in reach are skipped in one step; an anchor whose history or dependencies fail is
dropped for the rest of the search, since both only get worse as the candidate length
grows. :class:`SearchStats` counts the work: indexing is O(L), and on the logs of the tests
(static, drifting shapes, recurrent state, no anchor) the whole search stays below 3 L
counted operations. Hash collisions can only cost time, never change a result. The
signature must hash consistently with ``==`` (as hashable values do).

Bounded log. :class:`OperatorSequenceSearch` keeps the log for a live stream: it searches
only when an OUTPUT is appended, remembers which window ends have already been shown to
fail, and keeps at most ``max_entries`` entries. Appending is O(1) amortized; a search after
a failed one only tries windows that end at the new OUTPUT, one FASTCHECK per anchor in the
newest ``1/R`` of the log. Trimming keeps absolute indices and moves ``base``: a read of a
trimmed entry then points before the log, so it counts as resident state (same absolute
index in every copy, never an in-window producer), and its producer's kind can no longer be
checked.
"""

import enum
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, fields

DEFAULT_MIN_REPEATS = 3
"""Consecutive identical inferences the search requires (R of the paper)."""

DEFAULT_MAX_ENTRIES = 2_000_000
"""Entries a bounded :class:`OperatorSequenceSearch` keeps."""

_MOD = (1 << 61) - 1
_RADIX = 0x2545F4914F6CDD1D % _MOD


class EntryKind(enum.Enum):
    """What a log entry is."""

    INPUT = 'input'
    """HtoD analogue: a host tensor enters the pass; produces one value."""
    OUTPUT = 'output'
    """DtoH analogue: a host read of one value (the result goes back to the host)."""
    OP = 'op'
    """An operator executed remotely; reads values, produces values."""


class RefRole(enum.Enum):
    """Where a value that an entry reads comes from."""

    PARAM = 'param'
    """A persistent value, uploaded once and cached by identity."""
    VALUE = 'value'
    """A value produced by an earlier log entry."""
    CONST = 'const'
    """A literal embedded in the call."""


@dataclass(frozen=True)
class Ref:
    """Where a value an entry reads comes from.

    ``key`` is a stable key (parameter cache id, constant digest) for PARAM and CONST, and
    the absolute log index of the producing entry for VALUE.
    """

    role: RefRole
    key: int | str

    @classmethod
    def param(cls, key: int | str) -> 'Ref':
        """Return a read of the persistent parameter ``key``."""
        return cls(RefRole.PARAM, key)

    @classmethod
    def const(cls, key: int | str) -> 'Ref':
        """Return a read of the literal with digest ``key``."""
        return cls(RefRole.CONST, key)

    @classmethod
    def value(cls, index: int) -> 'Ref':
        """Return a read of the value produced by the entry at absolute index ``index``."""
        return cls(RefRole.VALUE, index)


@dataclass(frozen=True)
class LogEntry:
    """One intercepted call.

    ``tag`` is the stage-one category (for example ``'op:aten.conv2d.default'``,
    ``'input'``, ``'output'``). ``signature`` holds the replay-relevant, provenance-free
    details (op overload, scalar arguments, shapes and dtypes) and is compared with ``==``.
    """

    kind: EntryKind
    tag: str
    signature: Hashable
    reads: tuple[Ref, ...] = ()


@dataclass(frozen=True)
class SequenceMatch:
    """An inference operator sequence found in a log: entries ``[start, start + length)``.

    ``start`` is an absolute log index (an INPUT) and ``start + length - 1`` an OUTPUT.
    ``repeats`` is the number of back-to-back copies verified entry by entry, the window
    itself included; the search stops counting at the required minimum.
    """

    start: int
    length: int
    repeats: int

    @property
    def stop(self) -> int:
        """Absolute index one past the window."""
        return self.start + self.length

    @property
    def end(self) -> int:
        """Absolute index of the OUTPUT that closes the window."""
        return self.start + self.length - 1

    @property
    def history_start(self) -> int:
        """Absolute index of the first entry of the oldest verified copy."""
        return self.start - (self.repeats - 1) * self.length


@dataclass
class SearchStats:
    """Counters of the work the search did; they only ever grow."""

    searches: int = 0
    """Searches run."""
    indexed: int = 0
    """Entries tagged and hashed."""
    candidates: int = 0
    """Start candidates examined: enough history and an anchor in reach."""
    slice_eq: int = 0
    """Tag-slice comparisons (SLICEEQ, O(1) each through the prefix hashes)."""
    fingerprint_eq: int = 0
    """Fingerprint-slice comparisons (O(1) each)."""
    anchors: int = 0
    """INPUT anchors examined."""
    full_checks: int = 0
    """FULLCHECK calls."""
    entry_eq: int = 0
    """ENTRYEQ calls."""
    dependency_steps: int = 0
    """Entries visited by data-dependency checks."""

    @property
    def work(self) -> int:
        """Return the total of the unit-cost operations counted, searches excluded."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name != 'searches')


def _is_index(key: object) -> bool:
    return isinstance(key, int) and not isinstance(key, bool) and key >= 0


def entries_equivalent(x: LogEntry, y: LogEntry, a: int, b: int, length: int) -> bool:
    """ENTRYEQ: whether ``x`` in the window at ``a`` matches ``y`` in the window at ``b``.

    Both windows have ``length`` entries and ``x`` and ``y`` sit at the same offset in them.
    The entries must agree in kind, tag, signature and number of reads, and read for read:
    PARAM and CONST reads must have the same key; a VALUE read of ``x`` produced inside its
    window needs the producer of ``y`` at the same offset inside its window, and one
    produced before its window (resident state) needs ``y`` to read the same absolute index,
    which must also lie before the window of ``y``. Anything else is unequal.
    """
    if (
        x.kind is not y.kind
        or x.tag != y.tag
        or len(x.reads) != len(y.reads)
        or x.signature != y.signature
    ):
        return False
    oldest = min(a, b)
    for rx, ry in zip(x.reads, y.reads, strict=True):
        if rx.role is not ry.role:
            return False
        if rx.role is RefRole.VALUE:
            px, py = rx.key, ry.key
            if not (_is_index(px) and _is_index(py)):
                return False
            offset = px - a
            if 0 <= offset < length:
                if py - b != offset:
                    return False
            elif offset < 0:
                if py != px or px >= oldest:
                    return False
            else:
                return False
        elif rx.key != ry.key:
            return False
    return True


def _check_dependency(
    entries: Sequence[LogEntry], base: int, s: int, length: int, stats: SearchStats
) -> bool:
    stats.dependency_steps += length
    for t in range(s - base, s - base + length):
        for ref in entries[t].reads:
            if ref.role is RefRole.VALUE:
                p = ref.key
                if not _is_index(p) or p >= t + base:
                    return False
                if p >= base and entries[p - base].kind is EntryKind.OUTPUT:
                    return False
    return True


def check_data_dependency(log: Sequence[LogEntry], s: int, length: int, *, base: int = 0) -> bool:
    """CHECKDATADEPENDENCY: whether window ``[s, s + length)`` satisfies eq. (3).

    Every VALUE read of entry ``s + t`` must come from an earlier entry of the window
    (``s <= producer < s + t``) or from resident state produced before ``s``, and its
    producer must be an INPUT or an OP, never an OUTPUT. Producers before ``base`` (trimmed)
    count as resident state of unknown kind. O(length).

    Args:
        log: The entries; ``log[i]`` has absolute index ``base + i``.
        s: Absolute index of the window's first entry.
        length: Number of entries in the window.
        base: Absolute index of ``log[0]``.

    Returns:
        False as well when the window does not lie inside the log.
    """
    if length < 1 or s < base or s + length > base + len(log):
        return False
    return _check_dependency(log, base, s, length, SearchStats())


def _full_check(
    entries: Sequence[LogEntry], base: int, k: int, length: int, r: int, stats: SearchStats
) -> bool:
    stats.full_checks += 1
    end = k + length - 1
    if length < 1 or k < base or end >= base + len(entries):
        return False
    if entries[k - base].kind is not EntryKind.INPUT:
        return False
    if entries[end - base].kind is not EntryKind.OUTPUT:
        return False
    if k - (r - 1) * length < base:
        return False
    # The order of the two checks does not change the result; comparing first stops at
    # the first mismatch, which is cheaper on the windows that fail.
    newest = k - base
    for j in range(1, r):
        b = k - j * length
        older = b - base
        for t in range(length):
            stats.entry_eq += 1
            if not entries_equivalent(entries[newest + t], entries[older + t], k, b, length):
                return False
    return _check_dependency(entries, base, k, length, stats)


def full_check(
    log: Sequence[LogEntry],
    k: int,
    length: int,
    min_repeats: int = DEFAULT_MIN_REPEATS,
    *,
    base: int = 0,
) -> bool:
    """FULLCHECK: whether window ``[k, k + length)`` is an IOS repeated ``min_repeats`` times.

    The window must start at an INPUT, end at an OUTPUT, pass
    :func:`check_data_dependency`, and have ``min_repeats`` back-to-back copies (the windows
    at ``k - j * length`` for ``j = 0 .. min_repeats - 1``, all inside the log) that are
    :func:`entries_equivalent` entry by entry.
    """
    _check_repeats(min_repeats)
    return _full_check(log, base, k, length, min_repeats, SearchStats())


def build_tags(log: Iterable[LogEntry]) -> tuple[list[int], dict[str, int]]:
    """BUILDTAGS: map each distinct tag to a small int (from 1, in order of appearance).

    Returns:
        The tag id of every entry and the mapping from tag to id.
    """
    ids: dict[str, int] = {}
    tags = [ids.setdefault(entry.tag, len(ids) + 1) for entry in log]
    return tags, ids


class _LogIndex:
    """The log with its prefix hashes and boundary indices, absolute indices from ``base``."""

    __slots__ = ('base', 'entries', 'tag_ids', 'tag_h', 'fp_h', 'pw', 'inputs', 'outputs', 'seams')

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.entries: list[LogEntry] = []
        self.tag_ids: dict[str, int] = {}
        # tag_h[i] and fp_h[i] are prefix hashes of the first i retained entries, up to a
        # common factor that cancels in _slice_hash, so trimming only drops their heads.
        self.tag_h = array('Q', [0])
        self.fp_h = array('Q', [0])
        self.pw = array('Q', [1])
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        # INPUTs right after an OUTPUT: the only anchors that can pass FULLCHECK for R >= 2.
        self.seams: list[int] = []

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def next_index(self) -> int:
        return self.base + len(self.entries)

    def append(self, entry: LogEntry) -> None:
        self.extend((entry,))

    def extend(self, entries: Iterable[LogEntry]) -> None:
        # One loop with local names: indexing is the O(L) part of a search of a whole log.
        tag_ids, inputs, outputs, seams = self.tag_ids, self.inputs, self.outputs, self.seams
        log, tag_h, fp_h, pw = self.entries, self.tag_h, self.fp_h, self.pw
        th, fh = tag_h[-1], fp_h[-1]
        index = self.base + len(log)
        last_output = outputs[-1] if outputs else -2
        value, input_kind, output_kind = RefRole.VALUE, EntryKind.INPUT, EntryKind.OUTPUT
        for entry in entries:
            if not isinstance(entry, LogEntry):
                raise TypeError(f'expected a LogEntry, got {type(entry).__name__}')
            tag, kind = entry.tag, entry.kind
            tag_id = tag_ids.get(tag)
            if tag_id is None:
                tag_id = tag_ids[tag] = len(tag_ids) + 1
            fp = hash((kind, tag, entry.signature, len(entry.reads)))
            for ref in entry.reads:
                fp = hash((fp, None if ref.role is value else (ref.role, ref.key)))
            th = (th * _RADIX + tag_id) % _MOD
            fh = (fh * _RADIX + fp % _MOD) % _MOD
            tag_h.append(th)
            fp_h.append(fh)
            if kind is input_kind:
                inputs.append(index)
                if last_output == index - 1:
                    seams.append(index)
            elif kind is output_kind:
                outputs.append(index)
                last_output = index
            log.append(entry)
            index += 1
        while len(pw) < len(tag_h):
            pw.append(pw[-1] * _RADIX % _MOD)

    def trim(self, count: int) -> None:
        """Drop the ``count`` oldest entries; absolute indices stay as they are."""
        count = min(count, len(self.entries))
        if count <= 0:
            return
        del self.entries[:count]
        del self.tag_h[:count]
        del self.fp_h[:count]
        self.base += count
        for indices in (self.inputs, self.outputs, self.seams):
            del indices[: bisect_left(indices, self.base)]
        if len(self.tag_ids) > 2 * len(self.entries) + 1024:
            self._renumber_tags()

    def _renumber_tags(self) -> None:
        # Keeps the tag map as small as the retained log when tags never repeat.
        tags, self.tag_ids = build_tags(self.entries)
        tag_h = array('Q', [0])
        for tag_id in tags:
            tag_h.append((tag_h[-1] * _RADIX + tag_id) % _MOD)
        self.tag_h = tag_h

    def slice_hash(self, prefix: array, start: int, length: int) -> int:
        i = start - self.base
        return (prefix[i + length] - prefix[i] * self.pw[length]) % _MOD


def _check_repeats(min_repeats: int) -> None:
    if isinstance(min_repeats, bool) or not isinstance(min_repeats, int) or min_repeats < 1:
        raise ValueError(f'min_repeats must be an int >= 1, got {min_repeats!r}')


def _fast_check(ix: _LogIndex, s: int, length: int, r: int, stats: SearchStats) -> bool:
    """FASTCHECK: whether the tags of ``[s, s + length)`` repeat ``r`` times back to back."""
    own = ix.slice_hash(ix.tag_h, s, length)
    count = 1  # The window compared with itself.
    p = s - length
    while count < r and p >= ix.base:
        stats.slice_eq += 1
        if ix.slice_hash(ix.tag_h, p, length) != own:
            break
        count += 1
        p -= length
    return count >= r


def _fingerprints_periodic(
    ix: _LogIndex, start: int, span: int, length: int, stats: SearchStats
) -> bool:
    """Whether the fingerprints of ``[start, start + span + length)`` have period ``length``."""
    stats.fingerprint_eq += 1
    return ix.slice_hash(ix.fp_h, start, span) == ix.slice_hash(ix.fp_h, start + length, span)


def _dependencies_alive(
    ix: _LogIndex,
    k: int,
    length: int,
    r: int,
    memo: dict[int, list[int]],
    stats: SearchStats,
) -> bool:
    """Necessary part of FULLCHECK at anchor ``k`` that only gets worse as ``length`` grows.

    It is CHECKDATADEPENDENCY, extended incrementally over calls with growing lengths, plus
    the ENTRYEQ rule that resident reads precede the oldest copy.
    """
    entries, base = ix.entries, ix.base
    oldest_copy = k - (r - 1) * length
    state = memo.get(k)
    if state is None:
        state = memo[k] = [k, -1]
    x, latest_resident = state
    if latest_resident >= oldest_copy:
        return False
    start = x
    stop = k + length
    try:
        while x < stop:
            for ref in entries[x - base].reads:
                if ref.role is RefRole.VALUE:
                    p = ref.key
                    if not _is_index(p) or p >= x:
                        return False
                    if p >= base and entries[p - base].kind is EntryKind.OUTPUT:
                        return False
                    if p < k:
                        if p >= oldest_copy:
                            return False  # Carried from a recent pass: fails from now on.
                        latest_resident = max(latest_resident, p)
            x += 1
    finally:
        stats.dependency_steps += x - start
    state[0], state[1] = x, latest_resident
    return True


def _search(
    ix: _LogIndex, r: int, stats: SearchStats, checked_through: int
) -> SequenceMatch | None:
    """OSS over the index; windows ending at or before ``checked_through`` are known to fail."""
    stats.searches += 1
    inputs, outputs, base = ix.inputs, ix.outputs, ix.base
    if not inputs or not outputs:
        return None
    e = outputs[-1]
    anchors = ix.seams if r >= 2 else inputs
    dropped: dict[int, int] = {}  # Anchor positions known to fail: skip to the next one left.
    memo: dict[int, list[int]] = {}

    def alive(pos: int) -> int:
        root = pos
        while root in dropped:
            root = dropped[root]
        while pos != root:
            dropped[pos], pos = root, dropped[pos]
        return root

    i = bisect_right(inputs, e) - 1
    j = len(outputs) - 2  # Candidates t + 1 for the OUTPUTs t < e.
    while i >= 0 or j >= 0:
        after_output = outputs[j] + 1 if j >= 0 else -1
        s = inputs[i] if i >= 0 else -1
        if s >= after_output:
            i -= 1
            if s == after_output:
                j -= 1
        else:
            s = after_output
            j -= 1
        length = e - s + 1
        if s - (r - 1) * length < base:
            break  # Every later candidate is longer: not enough history for r copies.
        pos = bisect_right(anchors, s) - 1
        if pos < 0:
            break  # No anchor at or before s, nor before any later candidate.
        # Anchors lie in [s - l, s] and their windows end after checked_through.
        low = max(s - length, checked_through - length + 2)
        if anchors[pos] < low:
            # Both bounds grow with s: skip to the candidates that can reach this anchor.
            a = anchors[pos]
            limit = min((a + e + 1) // 2, a + e - checked_through - 1)
            i = min(i, bisect_right(inputs, limit) - 1)
            j = min(j, bisect_right(outputs, limit - 1) - 1)
            continue
        stats.candidates += 1
        if not _fast_check(ix, s, length, r, stats):
            continue
        # Every anchor's copies cover [s - (r-1)l, s): it must have period l.
        if r >= 3 and not _fingerprints_periodic(
            ix, s - (r - 1) * length, (r - 2) * length, length, stats
        ):
            continue
        pos = alive(pos)
        while pos >= 0:
            k = anchors[pos]
            if k < low:
                break
            stats.anchors += 1
            # Cheap checks first; a failed history or dependency check is final.
            if k - (r - 1) * length < base:
                dropped[pos] = pos - 1
            elif ix.entries[k + length - 1 - base].kind is EntryKind.OUTPUT and (
                r < 2
                or _fingerprints_periodic(
                    ix, k - (r - 1) * length, (r - 1) * length, length, stats
                )
            ):
                if not _dependencies_alive(ix, k, length, r, memo, stats):
                    dropped[pos] = pos - 1
                elif _full_check(ix.entries, base, k, length, r, stats):
                    return SequenceMatch(k, length, r)
            pos = alive(pos - 1)
    return None


def find_sequence(
    log: Iterable[LogEntry],
    min_repeats: int = DEFAULT_MIN_REPEATS,
    *,
    base: int = 0,
    stats: SearchStats | None = None,
) -> SequenceMatch | None:
    """OSS: find the inference operator sequence of a log, or None.

    Args:
        log: The entries, oldest first; entry ``i`` has absolute index ``base + i``.
        min_repeats: R, the number of back-to-back identical copies required, the newest
            window included.
        base: Absolute index of the first entry; VALUE reads of smaller indices are
            resident state.
        stats: Counters to add this search's work to.

    Returns:
        The window of the first (start, anchor) pair in the normative order that passes
        FULLCHECK, with absolute indices, or None.
    """
    _check_repeats(min_repeats)
    stats = SearchStats() if stats is None else stats
    ix = _LogIndex(base)
    ix.extend(log)
    stats.indexed += len(ix)
    return _search(ix, min_repeats, stats, base - 1)


def find_ios(
    log: Sequence[LogEntry], min_repeats: int = DEFAULT_MIN_REPEATS, *, base: int = 0
) -> list[LogEntry] | None:
    """Return the entries of the sequence :func:`find_sequence` finds, or None."""
    match = find_sequence(log, min_repeats, base=base)
    if match is None:
        return None
    return list(log[match.start - base : match.stop - base])


class OperatorSequenceSearch:
    """A bounded operator log for a live stream, searched whenever an OUTPUT is appended.

    Entries get consecutive absolute indices from 0. The log keeps at most ``max_entries``
    entries: when it would hold more, it drops the oldest eighth of them at once (so the cost
    is amortized), moving :attr:`base`. VALUE reads keep their absolute indices, so a read
    of a dropped entry is resident state from then on. A search after every OUTPUT needs
    only the windows that end at the newest OUTPUT; windows ending at an older OUTPUT whose
    search found nothing are skipped (until the next trim), which gives the result
    :func:`find_sequence` would give on the retained log.
    """

    def __init__(
        self, min_repeats: int = DEFAULT_MIN_REPEATS, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        """Create an empty log.

        Args:
            min_repeats: R, consecutive identical inferences required.
            max_entries: Most entries kept; a sequence is found only if ``min_repeats``
                copies of it (plus up to one period of realignment) fit.
        """
        _check_repeats(min_repeats)
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f'max_entries must be an int >= 1, got {max_entries!r}')
        self._min_repeats = min_repeats
        self._max_entries = max_entries
        self._index = _LogIndex()
        self._checked_through = -1
        self._last_match: SequenceMatch | None = None
        self.stats = SearchStats()

    @property
    def min_repeats(self) -> int:
        """R, the number of consecutive identical inferences required."""
        return self._min_repeats

    @property
    def max_entries(self) -> int:
        """Most entries the log keeps."""
        return self._max_entries

    @property
    def base(self) -> int:
        """Absolute index of the oldest retained entry."""
        return self._index.base

    @property
    def next_index(self) -> int:
        """Absolute index the next appended entry gets."""
        return self._index.next_index

    @property
    def last_match(self) -> SequenceMatch | None:
        """The result of the latest search (None before any)."""
        return self._last_match

    def __len__(self) -> int:
        """Return the number of retained entries."""
        return len(self._index)

    def _add(self, entry: LogEntry) -> None:
        ix = self._index
        ix.append(entry)
        self.stats.indexed += 1
        if len(ix) > self._max_entries:
            ix.trim(len(ix) - self._max_entries + self._max_entries // 8)
            # A trimmed producer's kind is unknown from now on, so a window that failed for
            # reading an OUTPUT may pass: check every window again at the next search.
            self._checked_through = ix.base - 1

    def append(self, entry: LogEntry) -> SequenceMatch | None:
        """Append one entry; if it is an OUTPUT, search and return the result, else None."""
        self._add(entry)
        if entry.kind is EntryKind.OUTPUT:
            return self.search()
        return None

    def extend(self, entries: Iterable[LogEntry]) -> SequenceMatch | None:
        """Append entries and search once at the end if any of them was an OUTPUT.

        Returns:
            The result of that search, or None when no OUTPUT was appended.
        """
        searched = False
        for entry in entries:
            self._add(entry)
            searched = searched or entry.kind is EntryKind.OUTPUT
        return self.search() if searched else None

    def search(self) -> SequenceMatch | None:
        """Search the retained log now; the windows end at its newest OUTPUT."""
        ix = self._index
        match = _search(ix, self._min_repeats, self.stats, self._checked_through)
        self._last_match = match
        outputs = ix.outputs
        if (
            match is None
            and outputs
            and (len(outputs) < 2 or outputs[-2] <= self._checked_through)
        ):
            # Every window ending at a retained OUTPUT up to the newest one has failed.
            self._checked_through = outputs[-1]
        return match

    def entry(self, index: int) -> LogEntry:
        """Return the retained entry at absolute index ``index``."""
        if not self.base <= index < self.next_index:
            raise IndexError(f'entry {index} is not in the log [{self.base}, {self.next_index})')
        return self._index.entries[index - self.base]

    def entries(self, match: SequenceMatch) -> list[LogEntry]:
        """Return the entries of ``match`` (the IOS); they must still be retained."""
        if match.start < self.base or match.stop > self.next_index:
            raise IndexError(
                f'window [{match.start}, {match.stop}) is not in the log '
                f'[{self.base}, {self.next_index})'
            )
        return self._index.entries[match.start - self.base : match.stop - self.base]

    def clear(self) -> None:
        """Drop every entry; numbering goes on, so older values become resident state."""
        self._index = _LogIndex(self._index.next_index)
        self._checked_through = self._index.base - 1
        self._last_match = None
