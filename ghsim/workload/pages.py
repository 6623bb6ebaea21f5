"""Pages of unified memory: which 2 MB GPU pages sit in HBM, and what a kernel's touch costs.

Page state lives in numpy arrays (``resident``, one flag per page, ``counts``, remote accesses
per page, and ``last_use`` per buffer for LRU). Two allocators behave differently:

* **managed** (``cudaMallocManaged``, :meth:`PageTable.touch`): a touch of buffers that are not
  resident faults their pages in; when HBM is full the least recently used pages of other
  buffers are evicted (written back to host memory) first. So a working set larger than HBM
  thrashes: every pass over it migrates what the previous pass evicted.
* **system** (``malloc`` on an ATS system, :meth:`PageTable.access`): nothing faults. A page
  stays where it was first touched (:meth:`PageTable.add` for the CPU,
  :meth:`PageTable.add_on_gpu` for the GPU) and the GPU reads and writes host-resident pages in
  place; each pass adds to their access counters, and with access-counter migration a page past
  the threshold moves to HBM if HBM has room (nothing is evicted for it). Freed HBM pages of
  GPU-first-touched buffers stay with the caching allocator (``pool``) for the next such buffer.

A buffer touched by the GPU for the first time (``add_on_gpu``) is created in HBM: no bytes move
in, as a caching allocator hands out memory the previous micro-batch already populated.

The table tracks at most ``limit`` pages (:data:`ghsim.limits.MAX_PAGES`), checked before an
array grows, so a page size near zero is refused at once instead of exhausting memory; the flags
grow by doubling, so adding buffers one by one stays linear in the pages tracked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ghsim.errors import LimitError
from ghsim.limits import MAX_PAGES


@dataclass(frozen=True)
class Touch:
    """What one access did: pages faulted in and pages evicted to make room."""

    faulted: int
    evicted: int


@dataclass(frozen=True)
class Access:
    """What one pass over system-allocated buffers did (no faults: ATS)."""

    host_read: int
    """Pages read in place from host memory over the host link."""
    host_written: int
    """Pages written in place in host memory."""
    hbm_read: int
    """Pages read from HBM."""
    hbm_written: int
    """Pages written in HBM."""
    migrated: dict[str, int]
    """Pages per buffer whose access counters passed the threshold in this pass and that moved
    to HBM after it (the pass itself still accessed them in place)."""


@dataclass
class PageTable:
    """Managed buffers split into ``page_bytes`` pages, at most ``capacity`` pages in HBM."""

    page_bytes: float
    capacity: int
    flags: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Residency flags of every page tracked, then room to grow (see :attr:`resident`)."""
    counters: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Remote accesses counted per page since it last migrated, then room to grow."""
    size: int = 0
    """Pages tracked."""
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    last_use: dict[str, int] = field(default_factory=dict)
    clock: int = 0
    held: dict[str, int] = field(default_factory=dict)
    """Resident pages per buffer (kept in step with ``resident``)."""
    count: int = 0
    """Resident pages in all (the caching allocator's ``pool`` included)."""
    pool: int = 0
    """HBM pages freed by GPU-first-touched buffers and kept by the caching allocator
    (:meth:`release` with ``keep``): only :meth:`add_on_gpu` reuses them."""
    limit: int = MAX_PAGES
    source: str = "page table"
    key: str = ""
    """Where a page size that needs more than ``limit`` pages came from, for the error."""

    @property
    def resident(self) -> np.ndarray:
        """One flag per page tracked: in HBM or not (a view: writes go to the table)."""
        return self.flags[: self.size]

    @property
    def counts(self) -> np.ndarray:
        """Remote accesses counted per page tracked (a view: writes go to the table)."""
        return self.counters[: self.size]

    @property
    def resident_pages(self) -> int:
        return self.count

    @property
    def room(self) -> int:
        """HBM pages neither resident nor kept by the caching allocator."""
        return self.capacity - self.count

    def add(self, name: str, nbytes: float, in_hbm: bool = False) -> None:
        """Register a buffer (first touched by the CPU unless ``in_hbm``); raises
        :class:`LimitError` when the table would track more than ``limit`` pages."""
        pages = nbytes / self.page_bytes
        if not pages <= self.limit - self.size:  # also catches inf and nan
            raise LimitError(self.source, self.key, f"pages of {self.page_bytes:.4g} bytes "
                             f"would need more than {self.limit:,} pages for "
                             f"{(self.size * self.page_bytes + nbytes) / 2**30:.4g} GiB of "
                             "managed memory (ghsim.limits.MAX_PAGES); expected larger pages")
        count = max(1, math.ceil(pages))
        start = self.size
        if start + count > len(self.flags):
            length = max(start + count, 2 * len(self.flags))
            grown = np.zeros(length, dtype=bool)
            grown[:start] = self.flags[:start]
            self.flags = grown
            counters = np.zeros(length)
            counters[:start] = self.counters[:start]
            self.counters = counters
        self.flags[start:start + count] = in_hbm
        self.counters[start:start + count] = 0.0
        self.size = start + count
        self.ranges[name] = (start, start + count)
        self.last_use[name] = -1
        self.held[name] = count if in_hbm else 0
        self.count += self.held[name]

    def add_on_gpu(self, name: str, nbytes: float, evict: bool = True) -> Touch:
        """Register a buffer the GPU touches first: its pages are created in HBM and no bytes
        move in. With ``evict`` (managed memory) the least recently used pages of other buffers
        are evicted to make room; without (system memory: the kernel allocates on the HBM NUMA
        node while it has room, pages the caching allocator kept first), what does not fit is
        placed in host memory. Returns the pages evicted (``faulted`` is always 0)."""
        self.add(name, nbytes)
        start, end = self.ranges[name]
        pages = end - start
        evicted = 0
        if evict:
            overflow = self.count + pages - self.capacity
            evicted = self._evict(overflow, {name}) if overflow > 0 else 0
            placed = min(pages, self.capacity - self.count)
            taken = 0
        else:
            placed = min(pages, self.pool + self.room)
            taken = min(placed, self.pool)
        self.resident[start:start + placed] = True
        self.held[name] = placed
        self.pool -= taken
        self.count += placed - taken
        return Touch(0, evicted)

    def release(self, name: str, keep: bool = False) -> int:
        """Free a buffer; returns how many of its pages were in HBM. With ``keep`` those pages
        stay in HBM with the caching allocator (:attr:`pool`) instead of becoming free."""
        start, end = self.ranges.pop(name)
        self.resident[start:end] = False
        self.last_use.pop(name)
        freed = self.held.pop(name)
        if keep:
            self.pool += freed
        else:
            self.count -= freed
        return freed

    def access(self, reads: list[str], writes: list[str], accesses: float,
               threshold: float | None) -> Access:
        """The GPU reads ``reads`` and writes ``writes`` where they are (system-allocated
        memory on an ATS system): host-resident pages in place, the rest in HBM. Each pass
        counts ``accesses`` remote accesses on every host-resident page it touches (a buffer
        both read and written counts twice); with a ``threshold`` (access-counter migration
        on), pages whose count reaches it move to HBM after the pass, buffer by buffer in the
        order given, while HBM has room (nothing is evicted for them), and their count
        restarts. Without one nothing is counted or moved."""
        self.clock += 1
        counted = {"read": (0, 0), "write": (0, 0)}
        for kind, names in (("read", reads), ("write", writes)):
            host = hbm = 0
            for name in names:
                start, end = self.ranges[name]
                held = self.held[name]
                hbm += held
                host += (end - start) - held
                if threshold is not None and held < end - start:
                    remote = ~self.resident[start:end]
                    self.counts[start:end][remote] += accesses
                self.last_use[name] = self.clock
            counted[kind] = (host, hbm)
        migrated: dict[str, int] = {}
        if threshold is not None:
            for name in dict.fromkeys([*reads, *writes]):
                start, end = self.ranges[name]
                if self.room <= 0:
                    break
                if self.held[name] == end - start:
                    continue
                hot = np.flatnonzero(~self.resident[start:end]
                                     & (self.counts[start:end] >= threshold))[: self.room]
                if len(hot):
                    self.resident[start + hot] = True
                    self.counts[start + hot] = 0.0
                    self.held[name] += len(hot)
                    self.count += len(hot)
                    migrated[name] = len(hot)
        (host_read, hbm_read), (host_written, hbm_written) = counted["read"], counted["write"]
        return Access(host_read, host_written, hbm_read, hbm_written, migrated)

    def touch(self, names: list[str]) -> Touch:
        """The GPU accesses ``names``: fault in what is missing, evicting LRU pages first."""
        self.clock += 1
        missing = 0
        for name in names:
            start, end = self.ranges[name]
            missing += (end - start) - self.held[name]
        overflow = self.count + missing - self.capacity
        evicted = self._evict(overflow, set(names)) if overflow > 0 else 0
        for name in names:
            start, end = self.ranges[name]
            if self.held[name] < end - start:
                self.resident[start:end] = True
                self.count += (end - start) - self.held[name]
                self.held[name] = end - start
            self.last_use[name] = self.clock
        return Touch(missing, evicted)

    def _evict(self, pages: int, keep: set[str]) -> int:
        """Evict ``pages`` pages from the least recently used buffers not in ``keep``."""
        evicted = 0
        for name in sorted((n for n in self.ranges if n not in keep and self.held[n]),
                           key=lambda n: self.last_use[n]):
            if evicted >= pages:
                break
            start, end = self.ranges[name]
            held = np.flatnonzero(self.resident[start:end])
            take = held[: pages - evicted]
            self.resident[start + take] = False
            self.held[name] -= len(take)
            self.count -= len(take)
            evicted += len(take)
        return evicted
