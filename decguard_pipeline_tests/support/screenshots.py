"""The screenshots of docs/html-report.md, made from the bundled refund example:

    .venv/bin/python -m decguard_pipeline_tests.support.screenshots docs/img

golden (``test``, default backend), ``test --all`` with the order-sensitive backend, and the
diff of the default against the ``strong_model`` backend under a copy of the contract with
``pipeline.statistics`` (intervals and p-values). Headless Chromium as in the browser tests.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "data" / "contracts" / "refund"
WIDTH = 1280


def _cli(*args: object) -> None:
    from decguard_pipeline.cli import cli

    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    if result.exit_code not in (0, 1):
        raise SystemExit(f"decguard-pipeline {' '.join(map(str, args))}: {result.stderr}")


def make_pages(work: Path) -> dict[str, tuple[Path, int | None]]:
    """The three pages, and how many pixels of each to show (None: the whole page). Paths
    are given relative to ``work`` (the current directory meanwhile), as a user types them."""
    contract = Path("refund") / "decguard.yaml"
    shutil.copytree(REFUND, work / contract.parent)
    with (work / contract).open("a", encoding="utf-8") as out:
        out.write("\npipeline:\n  statistics: {bootstrap_resamples: 2000}\n")
    previous = Path.cwd()
    os.chdir(work)
    try:
        _cli("test", contract, "-o", "golden.json", "--html", "golden.html")
        _cli("test", contract, "-b", "order_sensitive", "--all", "-o", "all.json",
             "--html", "all.html")  # fmt: skip
        _cli("test", contract, "-b", "strong_model", "-o", "strong.json")
        _cli("diff", "golden.json", "strong.json", "-c", contract, "-o", "diff.json",
             "--html", "diff.html")  # fmt: skip
    finally:
        os.chdir(previous)
    return {
        "html-report-golden.png": (work / "golden.html", None),
        "html-report-all.png": (work / "all.html", 1900),
        "html-report-diff.png": (work / "diff.html", None),
    }


def main(directory: str) -> None:
    from decguard_pipeline_tests.support.browser import Chromium, screenshot_folder, top_of

    out = screenshot_folder(directory)
    with tempfile.TemporaryDirectory() as tmp:
        pages = make_pages(Path(tmp))
        chromium = Chromium()  # after the reports: see Chromium's note on event loops
        try:
            for name, (page_path, height) in pages.items():
                page, seen = chromium.open(page_path, ready="body[data-ready]", width=WIDTH)
                if seen.problems():
                    raise SystemExit(f"{page_path.name}: {seen.problems()}")
                clip = top_of(WIDTH, height)
                page.screenshot(path=str(out / name), full_page=True, clip=clip)
                print(out / name)
        finally:
            chromium.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
