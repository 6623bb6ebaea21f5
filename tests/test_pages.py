"""The page table: first touch, faults, LRU eviction, release."""

from __future__ import annotations

from ghsim.workload.pages import PageTable

MIB2 = 2 * 2**20


def test_faults_and_lru_eviction_by_hand() -> None:
    table = PageTable(MIB2, capacity=4)
    table.add("a", 2 * MIB2)           # CPU first touch: in host memory
    table.add("b", 2 * MIB2)
    table.add("c", 2 * MIB2)
    first = table.touch(["a"])
    assert (first.faulted, first.evicted) == (2, 0)
    table.touch(["b"])
    assert table.resident_pages == 4
    third = table.touch(["c"])          # HBM full: the least recently used, a, goes
    assert (third.faulted, third.evicted) == (2, 2)
    assert table.held == {"a": 0, "b": 2, "c": 2}
    again = table.touch(["c"])
    assert (again.faulted, again.evicted) == (0, 0)
    assert table.release("b") == 2 and table.resident_pages == 2
    assert int(table.resident.sum()) == table.resident_pages


def test_working_set_larger_than_hbm_thrashes_every_pass() -> None:
    table = PageTable(MIB2, capacity=3)
    for name in "wxyz":
        table.add(name, MIB2)
    faults = []
    for _ in range(3):
        faults.append(sum(table.touch([n]).faulted for n in "wxyz"))
    assert faults == [4, 4, 4]  # cyclic access over 4 pages with room for 3: LRU misses always
