"""Pages of managed memory: which 2 MB GPU pages sit in HBM, and what a kernel's touch costs.

Page state lives in numpy arrays (``resident``, one flag per page, and ``last_use`` per buffer
for LRU). A touch of buffers that are not resident faults their pages in; when HBM is full the
least recently used pages of other buffers are evicted (written back to host memory) first. So a
working set larger than HBM thrashes: every pass over it migrates what the previous pass evicted.

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


@dataclass
class PageTable:
    """Managed buffers split into ``page_bytes`` pages, at most ``capacity`` pages in HBM."""

    page_bytes: float
    capacity: int
    flags: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Residency flags of every page tracked, then room to grow (see :attr:`resident`)."""
    size: int = 0
    """Pages tracked."""
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    last_use: dict[str, int] = field(default_factory=dict)
    clock: int = 0
    held: dict[str, int] = field(default_factory=dict)
    """Resident pages per buffer (kept in step with ``resident``)."""
    count: int = 0
    """Resident pages in all."""
    limit: int = MAX_PAGES
    source: str = "page table"
    key: str = ""
    """Where a page size that needs more than ``limit`` pages came from, for the error."""

    @property
    def resident(self) -> np.ndarray:
        """One flag per page tracked: in HBM or not (a view: writes go to the table)."""
        return self.flags[: self.size]

    @property
    def resident_pages(self) -> int:
        return self.count

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
            grown = np.zeros(max(start + count, 2 * len(self.flags)), dtype=bool)
            grown[:start] = self.flags[:start]
            self.flags = grown
        self.flags[start:start + count] = in_hbm
        self.size = start + count
        self.ranges[name] = (start, start + count)
        self.last_use[name] = -1
        self.held[name] = count if in_hbm else 0
        self.count += self.held[name]

    def release(self, name: str) -> int:
        """Free a buffer; returns how many of its pages were in HBM."""
        start, end = self.ranges.pop(name)
        self.resident[start:end] = False
        self.last_use.pop(name)
        freed = self.held.pop(name)
        self.count -= freed
        return freed

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
