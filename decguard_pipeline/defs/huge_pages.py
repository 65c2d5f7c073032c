"""This process's memory in 4 KiB pages, not transparent huge pages.

Arrow's allocator (mimalloc) and NumPy's large arrays ask the kernel for transparent huge
pages (``madvise``), so the first touch of any byte of a 2 MiB range makes the kernel zero
all of it; and freed ranges handed back a moment later are zeroed again when next touched. A
production day touches a few hundred MB this way: in ``perf`` profiles of a 100k-record day
on this project's 2-core VMs, ``clear_page_erms`` (the kernel zeroing pages for such faults)
was 38% of all samples, and the day took 1.2-1.9 s with huge pages against a steady
0.56-0.60 s without (10M records: 53.1 s against 44.7 s). With 4 KiB pages only the pages
actually written are zeroed.

``prctl(PR_SET_THP_DISABLE)`` applies to this process and is inherited by the processes it
forks or starts (the processes of ``evaluate``'s executor). ``$DECGUARD_HUGE_PAGES`` set to
``1`` (or ``true``, ``yes``, ``on``) keeps huge pages, for a machine where the TLB savings
matter more. Elsewhere than Linux it is a no-op.
"""

from __future__ import annotations

import ctypes
import os
import sys

ENV = "DECGUARD_HUGE_PAGES"
_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42
_KEEP = {"1", "true", "yes", "on"}


def _prctl(option: int, value: int = 0) -> int:
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return -1
    return int(prctl(option, value, 0, 0, 0))


def no_huge_pages() -> bool:
    """Ask the kernel for 4 KiB pages for this process from now on (unless
    ``$DECGUARD_HUGE_PAGES`` keeps huge pages); whether huge pages are off afterwards."""
    if not sys.platform.startswith("linux"):
        return False
    if os.environ.get(ENV, "").strip().lower() not in _KEEP:
        _prctl(_PR_SET_THP_DISABLE, 1)  # an old kernel refuses (EINVAL): nothing changes
    return huge_pages_off()


def huge_pages_off() -> bool:
    """Whether transparent huge pages are disabled for this process."""
    return sys.platform.startswith("linux") and _prctl(_PR_GET_THP_DISABLE) == 1
