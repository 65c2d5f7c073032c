"""defs/huge_pages.py: the CLI and the code location turn transparent huge pages off for
their process and what it starts, unless ``$DECGUARD_HUGE_PAGES=1``. Each case runs in a
fresh interpreter whose huge pages are first turned back on (a test process may have built
definitions already), and reads the kernel's own answer (``/proc/self/status``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from decguard_pipeline.defs import huge_pages

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or huge_pages._prctl(42) not in (0, 1),
    reason="transparent huge pages are a Linux setting this kernel does not report",
)

_FRESH = textwrap.dedent(
    """
    import ctypes, subprocess, sys
    ctypes.CDLL(None).prctl(41, 0, 0, 0, 0)  # as a process started with huge pages on


    def kernel_says(pid="self"):
        with open(f"/proc/{pid}/status") as status:
            line = next(x for x in status if x.startswith("THP_enabled:"))
        return line.split()[1]


    def child_says():
        return subprocess.run(
            [sys.executable, "-c", "print(open('/proc/self/status').read().split("
             "'THP_enabled:')[1].split()[0])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    """
)


def _run(code: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _FRESH + textwrap.dedent(code)],
        capture_output=True, text=True, env={**os.environ, **env}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _has_thp_line() -> bool:
    with open("/proc/self/status") as status:
        return any(line.startswith("THP_enabled:") for line in status)


def test_huge_pages_go_off_for_the_process_and_the_processes_it_starts():
    if not _has_thp_line():
        pytest.skip("this kernel does not report THP_enabled in /proc/self/status")
    said = _run(
        """
        from decguard_pipeline.defs.huge_pages import huge_pages_off, no_huge_pages
        print(kernel_says(), huge_pages_off(), no_huge_pages(), kernel_says(), child_says())
        """,
        DECGUARD_HUGE_PAGES="",
    )
    assert said == ["1", "False", "True", "0", "0"]


@pytest.mark.parametrize("keep", ["1", "true", " Yes ", "on"])
def test_decguard_huge_pages_keeps_them(keep):
    said = _run(
        """
        from decguard_pipeline.defs.huge_pages import no_huge_pages
        print(no_huge_pages(), kernel_says() if 'THP_enabled' in open('/proc/self/status')
              .read() else '1')
        """,
        DECGUARD_HUGE_PAGES=keep,
    )
    assert said == ["False", "1"]


@pytest.mark.parametrize("value", ["0", "", "false", "no"])
def test_any_other_value_turns_them_off(value):
    said = _run(
        """
        from decguard_pipeline.defs.huge_pages import no_huge_pages
        print(no_huge_pages())
        """,
        DECGUARD_HUGE_PAGES=value,
    )
    assert said == ["True"]


def test_the_command_line_turns_them_off_before_any_command():
    said = _run(
        """
        from decguard_pipeline.cli.app import main
        from decguard_pipeline.defs.huge_pages import huge_pages_off
        sys.argv = ["decguard-pipeline", "--help"]
        try:
            main()
        except SystemExit:
            pass
        print("after", huge_pages_off())
        """,
        DECGUARD_HUGE_PAGES="",
    )
    assert said[-2:] == ["after", "True"]


def test_building_the_code_location_turns_them_off():
    said = _run(
        """
        from decguard_pipeline.defs.huge_pages import huge_pages_off
        from decguard_pipeline.definitions import build_definitions
        before = huge_pages_off()
        build_definitions([])
        print(before, huge_pages_off())
        """,
        DECGUARD_HUGE_PAGES="",
    )
    assert said == ["False", "True"]
