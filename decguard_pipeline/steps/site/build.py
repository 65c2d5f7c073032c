"""``decguard-pipeline site build DIR``: every page of the evaluation site, written from the
warehouse into a folder that opens offline (relative links, no external loads). No Dagster
here. Queries: :mod:`.queries`; comparisons: :mod:`.compare`; rendering and the URL scheme:
``core/site``.

Pages are bounded whatever the warehouse holds: at most ``MAX_VERSIONS`` versions per
contract, comparisons among the newest ``MAX_COMPARED``, ``CASES_PER_PAGE`` cases a page and
``MAX_CASE_PAGES`` pages, ``MAX_GRID_ROWS`` rows and ``MAX_GRID_VERSIONS`` columns in a
cases × versions grid, ``MAX_LABELS`` labels in a chart or table; each cap says so on the
page. Each file is written whole or not at all (``core.atomic_file``); files of an earlier
build that this one did not write are removed, so links never lead to stale pages.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from decguard_pipeline.core.atomic_file import atomic_output
from decguard_pipeline.core.calibration.summary import equal_mass_reliability
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.html.charts import reliability_svg
from decguard_pipeline.core.html.figures import style as chart_style
from decguard_pipeline.core.site import charts, paths
from decguard_pipeline.core.site.render import render, static_file
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.site.compare import Reports, compare
from decguard_pipeline.steps.site.queries import HISTORY, SiteData
from decguard_pipeline.steps.site.transcripts import request_builder
from decguard_pipeline.warehouse import Warehouse

MAX_VERSIONS = 200
MAX_COMPARED = 10
CASES_PER_PAGE = 200
MAX_CASE_PAGES = 25
MAX_GRID_ROWS = 200
MAX_GRID_VERSIONS = 8
MAX_LABELS = 20
MAX_SEGMENTS = 100
MAX_DAYS = 400
MAX_PENDING = 100
MAX_COPY_BYTES = 50 * 1024 * 1024  # a bigger report file is linked from its own server only
LOW_CONFIDENCE = 0.6  # "low confidence" without the contract's confidence_threshold
MARKER = ".decguard-site"  # a folder holding this file is a site this command may rewrite
TILES = (
    ("accuracy", "accuracy"),
    ("macro_f1", "macro-F1"),
    ("ece", "ECE (equal width)"),
    ("ece_equal_mass", "ECE (equal mass)"),
    ("smece", "smooth ECE"),
    ("coverage", "coverage"),
    ("brier", "Brier"),
    ("nll", "NLL"),
    ("error_rate", "error rate"),
    ("latency_p95_ms", "p95 latency (ms)"),
    ("cost_per_1000", "cost / 1,000"),
)


@dataclass
class Built:
    folder: Path
    pages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be shown, and why
    seconds: float = 0.0


def when(moment: Any) -> str:
    if not isinstance(moment, datetime):
        return "–"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def iso(moment: Any) -> str:
    return moment.astimezone(UTC).isoformat() if isinstance(moment, datetime) else ""


def clip(text: Any, limit: int = 300) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def honesty(confidences: Iterable[float], correct: Iterable[bool]) -> str:
    """One sentence: how far the mean confidence is from the accuracy, on labeled decided
    cases."""
    conf = np.asarray(list(confidences), dtype=float)
    hits = np.asarray(list(correct), dtype=bool)
    if not len(conf):
        return "No labeled, decided case: calibration cannot be measured."
    gap = float(conf.mean() - hits.mean())
    side = "over-confident" if gap > 0 else "under-confident"
    if abs(gap) < 0.005:
        return (
            f"Mean confidence {conf.mean():.3f} matches accuracy {hits.mean():.3f} "
            f"over {len(conf):,} labeled cases."
        )
    return (
        f"{side.capitalize()} by {abs(gap):.3f} on average: mean confidence {conf.mean():.3f}, "
        f"accuracy {hits.mean():.3f} over {len(conf):,} labeled cases."
    )


class SiteWriter:
    """Writes pages into ``folder``, remembering every file written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written: set[str] = set()

    def text(self, path: str, text: str) -> None:
        self.bytes(path, text.encode("utf-8"))

    def bytes(self, path: str, data: bytes) -> None:
        with atomic_output(self.folder / path) as out:
            out.write(data)
        self.written.add(path)

    def remove_stale(self) -> None:
        """Files an earlier build wrote that this one did not (a version or day gone)."""
        for top in ("contracts", "files"):
            base = self.folder / top
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*"), reverse=True):
                relative = path.relative_to(self.folder).as_posix()
                if (
                    path.is_file()
                    and relative not in self.written
                    and not path.name.startswith(".")
                ):
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()


def prepare(folder: Path) -> None:
    """The folder to build into: new, empty, or a site built before (it holds ``MARKER``).
    Anything else is refused, so a typo never overwrites a folder of other files."""
    if folder.exists() and not folder.is_dir():
        raise DecGuardError(f"site folder {folder} is a file")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).exists():
        raise DecGuardError(
            f"site folder {folder} is not empty and holds no site built by decguard-pipeline "
            f"(no {MARKER} file): give a new or empty folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("a site written by `decguard-pipeline site build`\n")


def build_site(
    warehouse: Warehouse,
    folder: str | Path,
    *,
    entries: list[ContractEntry] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Built:
    """Every page of the site from the warehouse into ``folder``. ``entries``: the contracts
    as loaded (comparisons and LLM requests need them; default: discover them as ``evaluate``
    does)."""
    started = clock()
    out = Path(folder)
    prepare(out)
    if entries is None:
        from decguard_pipeline.steps.contracts import discover_contracts

        entries = discover_contracts()
    by_key = {e.key: e for e in entries}
    writer = SiteWriter(out)
    built = Built(out)
    with SiteData(warehouse) as data:
        Site(data, writer, by_key, built, str(warehouse.root)).write_all()
    writer.bytes(paths.CSS, static_file("site.css") + b"\n/* charts */\n" + chart_style().encode())
    writer.bytes(paths.JS, static_file("site.js"))
    writer.remove_stale()
    built.pages = sorted(p for p in writer.written if p.endswith(".html"))
    built.seconds = clock() - started
    return built


class Site:
    def __init__(
        self,
        data: SiteData,
        writer: SiteWriter,
        entries: dict[str, ContractEntry],
        built: Built,
        warehouse: str,
    ) -> None:
        self.data, self.writer, self.entries, self.built = data, writer, entries, built
        self.common = {"as_of": "–", "warehouse": warehouse, "crumbs": []}

    def page(
        self, template: str, path: str, crumbs: list[tuple[str, str]] | None = None, **context: Any
    ) -> None:
        context = {**self.common, "crumbs": crumbs or [], **context}
        self.writer.text(path, render(template, path, **context))

    # -- the whole site -------------------------------------------------------------------------

    def write_all(self) -> None:
        contracts = self.data.contracts()
        models = [self.contract_model(c) for c in contracts]
        moments = [v["evaluated_at"] for m in models for v in m["versions"]]
        moments += [d["recorded"] for m in models for d in m["days"] if d.get("recorded")]
        if moments:
            self.common["as_of"] = when(max(moments))
        for model in models:
            self.contract_pages(model)
        self.page("index.html", paths.INDEX, contracts=[self.index_row(m) for m in models])
        self.usage_page()

    def contract_model(self, c: dict[str, Any]) -> dict[str, Any]:
        key = c["contract"]
        spec = c["spec"]
        decision = spec.get("decision") or {}
        evaluation = spec.get("evaluation") or {}
        versions = self.data.versions(key)
        for v in versions:
            v["when"], v["evaluated_iso"] = when(v["evaluated_at"]), iso(v["evaluated_at"])
        days = self.data.production_days(key)[:MAX_DAYS]
        return {
            "key": key,
            "decision": c["decision"],
            "decision_type": c["decision_type"],
            "description": decision.get("description") or "",
            "labels": c["labels"],
            "threshold": evaluation.get("confidence_threshold"),
            "bins": evaluation.get("calibration_bins") or 10,
            "versions": versions,
            "days": days,
            "registered": self.data.registered(key),
        }

    # -- index --------------------------------------------------------------------------------

    def index_row(self, m: dict[str, Any]) -> dict[str, Any]:
        key = m["key"]
        newest = m["versions"][0] if m["versions"] else None
        evaluated = {v["target"] for v in m["versions"]}
        row = {
            "key": key,
            "description": m["description"],
            "newest": newest,
            "reasons": [],
            "compare_path": None,
            "no_compare": "",
            "honesty": "",
            "newest_day": m["days"][0] if m["days"] else None,
            "versions": m["versions"],
            "unevaluated": [r["target"] for r in m["registered"] if r["target"] not in evaluated],
        }
        if newest is not None:
            row["reasons"] = self.why_not(key, newest)
            row["compare_path"] = m["compare"].get(newest["target"])
            row["no_compare"] = (
                "no baseline: the first approved version of its kind"
                if newest.get("regression_status") == "no_baseline"
                else "no comparison"
            )
            row["honesty"] = m["honesty"].get(newest["target"], "")
        return row

    @staticmethod
    def failing(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The checks that do not hold, failing ones first, named as the verdict names them."""
        order = {"fail": 0, "warn": 1}
        bad = [c for c in checks if c["status"] in order]
        return sorted(bad, key=lambda c: (order[c["status"]], c["name"]))

    def why_not(self, key: str, v: dict[str, Any]) -> list[dict[str, Any]]:
        """The verdict's gates that do not hold: as the ``verdicts`` row lists them (with
        value and threshold), else from the target's newest checks."""
        gates = v.get("gates")
        if gates is not None:
            return list(gates)
        return self.failing(self.checks(key, v["target"]))

    def checks(self, key: str, target: str) -> list[dict[str, Any]]:
        return [{**c, "name": gate_name(c)} for c in self.data.checks(key, target)]

    # -- one contract -------------------------------------------------------------------------

    def contract_pages(self, m: dict[str, Any]) -> None:
        key = m["key"]
        crumbs = [("contracts", paths.INDEX)]
        shown = m["versions"][:MAX_VERSIONS]
        targets = [v["target"] for v in shown]
        entry = self.entries.get(key)
        m["compare"], m["honesty"] = {}, {}
        pairs, no_pairs = self.compare_pages(m, shown, entry)
        for v in shown:
            v["regression"] = self.regression_text(v)
            v["compare_path"] = m["compare"].get(v["target"])
        for v in shown:
            self.version_pages(m, v, entry)
        pair_index = {
            f"{p['candidate']}\n{p['baseline']}": paths.relative(
                paths.contract_page(key), p["path"]
            )
            for p in pairs
        }
        self.page(
            "contract.html",
            paths.contract_page(key),
            crumbs,
            c=m,
            versions=shown,
            versions_hidden=len(m["versions"]) - len(shown),
            pairs=pairs,
            pair_index=json.dumps(pair_index),
            compared=targets[:MAX_COMPARED],
            compared_hidden=len(targets) > MAX_COMPARED,
            no_pairs=no_pairs,
            charts=self.history_charts(key),
            days=m["days"],
        )
        if m["days"]:
            self.production_pages(m)

    @staticmethod
    def regression_text(v: dict[str, Any]) -> str:
        status = v.get("regression_status")
        if status is None:
            return "–"
        if status == "no_baseline":
            return "no baseline"
        gates = [
            f.removeprefix("regression ")
            for f in v.get("failing") or []
            if f.startswith("regression ")
        ]
        text = f"{status.upper()} vs {v.get('baseline_target')}"
        return text + (f" ({', '.join(gates)})" if gates else "")

    def history_charts(self, key: str) -> list[Any]:
        rows = self.data.history(key)
        gates = self.data.thresholds(key)
        out = []
        for metric, title in (*HISTORY, ("smece", "smooth ECE")):
            series: dict[str, charts.Series] = {}
            for r in rows:
                if r["metric"] == metric and _finite(r["value"]):
                    s = series.setdefault(r["backend"], charts.Series(r["backend"]))
                    version = r["target"].split("@", 1)[-1]
                    s.points.append(
                        charts.Point(
                            r["recorded_at"], r["value"], f"{version} · {when(r['recorded_at'])}"
                        )
                    )
            if not series:
                continue
            lines = [
                charts.Threshold(g["threshold"], g["level"], g["gate"])
                for g in gates
                if g["metric"] == metric
            ]
            out.append(charts.history_chart(title, list(series.values()), lines))
        return out

    # -- comparisons --------------------------------------------------------------------------

    def compare_pages(
        self, m: dict[str, Any], shown: list[dict[str, Any]], entry: ContractEntry | None
    ) -> tuple[list[dict[str, Any]], str]:
        key = m["key"]
        targets = [v["target"] for v in shown]
        if len(targets) < 2:
            return [], "One version evaluated: nothing to compare yet."
        if entry is None or entry.loaded is None:
            why = "not found" if entry is None else "does not load"
            note = (
                f"{key}: the contract file {why} (contracts folder or $DECGUARD_CONTRACTS), "
                "so no comparison was made"
            )
            self.built.notes.append(note)
            return [], note
        wanted: list[tuple[str, str, bool]] = []
        newest = targets[:MAX_COMPARED]
        for i, cand in enumerate(newest):
            wanted += [(cand, base, False) for base in newest[i + 1 :]]
        by_target = {v["target"]: v for v in shown}
        for v in shown:
            base = v.get("baseline_target")
            if base in by_target and v.get("regression_status") not in (None, "no_baseline"):
                wanted = [w for w in wanted if (w[0], w[1]) != (v["target"], base)]
                wanted.append((v["target"], base, True))
        reports = Reports(entry, self.data.warehouse)
        pairs = []
        for cand, base, regression in wanted:
            path = paths.compare_page(key, cand, base)
            try:
                result = compare(reports, cand, base)
            except DecGuardError as exc:
                self.built.notes.append(f"{key}: {cand} vs {base} not compared: {exc}")
                continue
            self.compare_page(m, by_target[cand], by_target[base], result, path, regression)
            pairs.append(
                {"candidate": cand, "baseline": base, "path": path, "regression": regression}
            )
            if regression:
                m["compare"][cand] = path
        return pairs, ""

    def compare_page(
        self,
        m: dict[str, Any],
        cand: dict[str, Any],
        base: dict[str, Any],
        result: dict[str, Any],
        path: str,
        regression: bool,
    ) -> None:
        key = m["key"]
        for d in result["deltas"]:
            worse = d["delta"] is not None and (
                d["delta"] < 0 if d["higher_better"] else d["delta"] > 0
            )
            d["tone"] = "worse" if worse and d["delta"] != 0 else ""
        layers = [
            (base["target"], self.data.reliability(key, base["target"], base["evaluation_run_id"])),
            (cand["target"], self.data.reliability(key, cand["target"], cand["evaluation_run_id"])),
        ]
        overlay = charts.overlay_reliability(layers, title="reliability: baseline and candidate")
        diff = self.data.diff(key, cand["target"]) if regression else None
        checks = (
            []
            if not regression
            else [c for c in self.data.checks(key, cand["target"]) if c["source"] == "regression"]
        )
        low = m["threshold"] if m["threshold"] is not None else LOW_CONFIDENCE
        self.page(
            "compare.html",
            path,
            [("contracts", paths.INDEX), (key, paths.contract_page(key))],
            c=m,
            candidate=cand,
            baseline=base,
            cmp=result,
            overlay=overlay,
            regression=regression,
            diff_status=None if diff is None else diff["status"],
            checks=checks,
            low_confidence=low,
            grid=self.grid(m, cand["target"], base["target"], low),
        )

    def grid(self, m: dict[str, Any], cand: str, base: str, low: float) -> dict[str, Any]:
        """Cases × versions: the two compared first, then the newest others; rows where the
        versions disagree, one errored, or one was unsure."""
        others = [v["target"] for v in m["versions"] if v["target"] not in (cand, base)]
        targets = [base, cand, *others[: MAX_GRID_VERSIONS - 2]]
        cells: dict[str, dict[str, Any]] = {}
        for r in self.data.case_grid(m["key"], targets):
            row = cells.setdefault(
                r["case_id"],
                {
                    "case_id": r["case_id"],
                    "position": r["position"],
                    "expected": r["expected"],
                    "input": clip(r["input_text"], 200),
                    "by": {},
                },
            )
            row["by"][r["target"]] = r
        rows, matched = [], 0
        for row in sorted(cells.values(), key=lambda r: r["position"]):
            got = [row["by"].get(t) for t in targets]
            decided = {g["selected"] for g in got if g is not None and g["error_kind"] is None}
            why = []
            if len(decided) > 1:
                why.append("flip")
            if any(g is not None and g["error_kind"] is not None for g in got):
                why.append("error")
            if any(
                g is not None and g["confidence"] is not None and g["confidence"] < low for g in got
            ):
                why.append("low confidence")
            if not why:
                continue
            matched += 1
            if len(rows) >= MAX_GRID_ROWS:
                continue
            row["why"] = ", ".join(why)
            row["cells"] = [self.grid_cell(g) for g in got]
            rows.append(row)
        return {
            "targets": targets,
            "rows": rows,
            "matched": matched,
            "total": len(cells),
            "hidden": matched - len(rows),
            "versions_hidden": max(len(others) - (MAX_GRID_VERSIONS - 2), 0),
        }

    @staticmethod
    def grid_cell(g: dict[str, Any] | None) -> dict[str, Any]:
        if g is None:
            return {"kind": "none"}
        if g["error_kind"] is not None:
            return {"kind": "error", "error": g["error_kind"]}
        kind = (
            "right" if g["correct"] is True else ("wrong" if g["correct"] is False else "unlabeled")
        )
        return {"kind": kind, "selected": g["selected"], "confidence": g["confidence"]}

    # -- one version --------------------------------------------------------------------------

    def version_pages(
        self, m: dict[str, Any], v: dict[str, Any], entry: ContractEntry | None
    ) -> None:
        key, target, run = m["key"], v["target"], v["evaluation_run_id"]
        crumbs = [("contracts", paths.INDEX), (key, paths.contract_page(key))]
        checks = self.checks(key, target)
        order = {"fail": 0, "warn": 1, "pass": 2}
        checks.sort(key=lambda c: (order.get(c["status"], 3), c["name"]))
        cases = self.data.cases(key, target)
        labeled = [c for c in cases if c["correct"] is not None and c["confidence"] is not None]
        m["honesty"][target] = honesty(
            [c["confidence"] for c in labeled], [c["correct"] for c in labeled]
        )
        intervals = self.data.intervals(key, target, run)
        tiles = [
            {"metric": name, "title": title, "value": v.get(name), "interval": intervals.get(name)}
            for name, title in TILES
            if v.get(name) is not None or name in ("accuracy", "ece")
        ]
        width_bins = self.data.reliability(key, target, run)
        curve = self.data.smooth_curve(key, target, run)
        conf = np.asarray([c["confidence"] for c in labeled], dtype=float)
        hits = np.asarray([c["correct"] for c in labeled], dtype=bool)
        mass_bins = equal_mass_reliability(conf, hits, m["bins"]) if len(conf) else []
        reliability = [
            reliability_svg(
                width_bins, title=f"equal-width bins · ECE {_fixed(v.get('ece'))}", smooth=curve
            ),
            reliability_svg(
                mass_bins,
                title=f"equal-mass bins · ECE {_fixed(v.get('ece_equal_mass'))}",
                smooth=curve,
            ),
        ]
        measures = self.data.calibration(key, target, run)
        per_label = sorted(
            (x for x in measures if x["label"] is not None), key=lambda x: -(x["value"] or 0)
        )
        kept = [x for x in measures if x["label"] is None] + per_label[:MAX_LABELS]
        consistency = json.loads(v.get("consistency_json") or "null")
        files = self.copy_files(key, target)
        self.page(
            "version.html",
            paths.version_page(key, target),
            crumbs,
            c=m,
            v=v,
            failing=self.why_not(key, v),
            checks=checks,
            compare_path=v.get("compare_path"),
            regression=v["regression"],
            n_cases=len(cases),
            files=files,
            tiles=tiles,
            honesty=m["honesty"][target],
            reliability=reliability,
            measures=kept,
            measures_hidden=len(per_label) - min(len(per_label), MAX_LABELS),
            measures_label_cap=MAX_LABELS,
            consistency=_consistency(consistency),
        )
        self.case_pages(m, v, cases, entry, [*crumbs, (target, paths.version_page(key, target))])

    def copy_files(self, key: str, target: str) -> dict[str, str | None]:
        """The newest HTML report and diff page, copied into the site (so it opens offline)."""
        found = self.data.report_files(key, target)
        out: dict[str, str | None] = {"report": None, "diff": None}
        for name, source, suffix in (
            ("report", found["report_json"], ".json"),
            ("diff", found["diff_json"], ".json"),
        ):
            if not source:
                continue
            page = str(source).removesuffix(suffix) + ".html"
            try:
                content = self.data.warehouse.read_bytes(page)
            except (OSError, ValueError):
                continue  # written before reports had pages, or deleted
            if len(content) > MAX_COPY_BYTES:
                self.built.notes.append(
                    f"{key}/{target}: {name} page over {MAX_COPY_BYTES:,} bytes, not copied"
                )
                continue
            path = paths.file_copy(key, target, f"{name}.html")
            self.writer.bytes(path, content)
            out[name] = path
        return out

    def case_pages(
        self,
        m: dict[str, Any],
        v: dict[str, Any],
        cases: list[dict[str, Any]],
        entry: ContractEntry | None,
        crumbs: list[tuple[str, str]],
    ) -> None:
        key, target = m["key"], v["target"]
        total = len(cases)
        pages = max(1, min(math.ceil(total / CASES_PER_PAGE), MAX_CASE_PAGES))
        capped = ""
        if total > pages * CASES_PER_PAGE:
            capped = (
                f"The first {pages * CASES_PER_PAGE:,} of {total:,} cases are shown; query "
                f"latest_case_results for the rest."
            )
        rebuild, why = request_builder(entry, target)
        note = why or (
            ""
            if rebuild is None
            else "Requests are rebuilt from the contract's backend settings (nothing is "
            "sent); the answer is the validated distribution, as stored."
        )
        pager = [(n, paths.cases_page(key, target, n)) for n in range(1, pages + 1)]
        for n in range(1, pages + 1):
            chunk = cases[(n - 1) * CASES_PER_PAGE : n * CASES_PER_PAGE]
            rows = [self.case_row(c, rebuild) for c in chunk]
            self.page(
                "cases.html",
                paths.cases_page(key, target, n),
                crumbs,
                c=m,
                v=v,
                rows=rows,
                first=(n - 1) * CASES_PER_PAGE + 1 if chunk else 0,
                last=(n - 1) * CASES_PER_PAGE + len(chunk),
                total=total,
                number=n,
                pager=pager,
                capped=capped,
                transcript_note=note,
            )

    @staticmethod
    def case_row(c: dict[str, Any], rebuild: Any) -> dict[str, Any]:
        labels, probs = c["labels"] or [], c["probs"] or []
        top = sorted(zip(labels, probs, strict=False), key=lambda lp: -lp[1])[:5]
        kind = "error" if c["error_kind"] else ("wrong" if c["correct"] is False else "")
        request = rebuild(c["case_id"], c["input_json"]) if rebuild is not None else None
        metadata = c["result_metadata_json"]
        if c["error_kind"]:
            answer = f"{c['error_kind']}: {c['error_message']}"
        else:
            answer = json.dumps(
                {
                    "selected": c["selected"],
                    "probabilities": dict(zip(labels, probs, strict=False)),
                },
                indent=2,
            )
        return {
            **c,
            "input": clip(c["input_text"], 400),
            "kind": kind,
            "top": top,
            "request": None if request is None else request["text"],
            "request_kind": None if request is None else request["kind"],
            "prompt": None if request is None else request["prompt"],
            "answer": answer,
            "metadata": None if metadata in (None, "{}") else metadata,
        }

    # -- production ---------------------------------------------------------------------------

    def production_pages(self, m: dict[str, Any]) -> None:
        key = m["key"]
        crumbs = [("contracts", paths.INDEX), (key, paths.contract_page(key))]
        days = m["days"]
        newest_checks = self.data.production_checks(key, days[0]["day"])
        chart_list = []
        for metric, title in (
            ("accuracy", "accuracy"),
            ("confidence_tv_distance", "confidence TV distance"),
            ("label_psi", "label PSI"),
            ("pending", "records lacking an outcome"),
        ):
            series = charts.Series(title)
            for d in days:
                if _finite(d[metric]):
                    at = datetime.strptime(d["day"], "%Y-%m-%d").replace(tzinfo=UTC)
                    series.points.append(charts.Point(at, d[metric], d["day"]))
            if not series.points:
                continue
            lines = [
                charts.Threshold(g["threshold"], g["level"], g["gate"])
                for g in newest_checks
                if g["metric"] == metric and g["threshold"] is not None
            ]
            chart_list.append(charts.history_chart(title, [series], lines))
        self.page(
            "production.html",
            paths.production_page(key),
            crumbs,
            c=m,
            days=days,
            charts=chart_list,
            days_hidden=0,
        )
        crumbs = [*crumbs, ("production", paths.production_page(key))]
        for d in days:
            self.day_page(m, d, crumbs)

    def day_page(self, m: dict[str, Any], d: dict[str, Any], crumbs: list[tuple[str, str]]) -> None:
        key, day = m["key"], d["day"]
        labels = sorted(
            self.data.label_drift(key, day), key=lambda x: -(x.get("current_share") or 0)
        )
        for item in labels:
            for name in ("current_share", "baseline_share", "current_count"):
                item.setdefault(name, None)
        shown = labels[:MAX_LABELS]
        notes = []
        chart_list = (
            [
                charts.paired_bars(
                    "label shares",
                    [x["label"] for x in shown],
                    [
                        ("baseline", [x["baseline_share"] for x in shown]),
                        ("this day", [x["current_share"] for x in shown]),
                    ],
                )
            ]
            if shown
            else []
        )
        current = self.data.histogram(key, day)
        baseline, why = self.baseline_histogram(m, d, len(current))
        if why:
            notes.append(why)
        if current:
            n = len(current)
            edges = [f"{i / n:.1f}–{(i + 1) / n:.1f}" for i in range(n)]
            sides = [("this day", _shares(current))]
            if baseline is not None:
                sides.insert(0, ("baseline", _shares(baseline)))
            chart_list.append(charts.paired_bars("confidence histogram", edges, sides))
        segments = self.data.segments(key, day)
        for s in segments:
            s["strip"] = charts.interval_strip(s["accuracy"], s["accuracy_low"], s["accuracy_high"])
        checks = self.data.production_checks(key, day)
        pending = [
            {**r, "input": clip(r["input_text"], 200)}
            for r in self.data.pending_records(key, day, MAX_PENDING)
        ]
        self.page(
            "day.html",
            paths.day_page(key, day),
            crumbs,
            c=m,
            d=d,
            failing=[x for x in checks if x["status"] in ("fail", "warn")],
            charts=chart_list,
            notes=notes,
            labels=shown,
            labels_hidden=len(labels) - len(shown),
            segments=segments[:MAX_SEGMENTS],
            segments_hidden=max(len(segments) - MAX_SEGMENTS, 0),
            pending=pending,
            checks=checks,
        )

    def baseline_histogram(
        self, m: dict[str, Any], d: dict[str, Any], bins: int
    ) -> tuple[list[float] | None, str]:
        """The baseline's confidence histogram in the day's bins: an earlier day's as stored,
        a golden target's from its cases; a pinned file's is not in the warehouse."""
        baseline, rule = d["baseline"], d["baseline_rule"]
        if baseline is None or not bins:
            return None, ""
        if rule == "previous":
            counts = self.data.histogram(m["key"], baseline)
            return (counts or None), "" if counts else f"baseline day {baseline} has no histogram"
        if rule == "golden":
            conf = np.asarray(self.data.golden_confidences(m["key"], baseline), dtype=float)
            index = np.clip(np.ceil(conf * bins).astype(int) - 1, 0, bins - 1)
            return np.bincount(index, minlength=bins).astype(float).tolist(), ""
        return (
            None,
            f"the baseline ({rule}: {baseline}) keeps its histogram in its file, "
            "not in the warehouse",
        )

    # -- usage --------------------------------------------------------------------------------

    def usage_page(self) -> None:
        rows = self.data.usage()
        totals = {
            name: (
                sum(r[name] for r in rows if r[name] is not None)
                if any(r[name] is not None for r in rows)
                else None
            )
            for name in ("prompt_tokens", "completion_tokens", "cost_per_run")
        }
        self.page("usage.html", paths.USAGE, [("contracts", paths.INDEX)], rows=rows, totals=totals)


def gate_name(check: dict[str, Any]) -> str:
    """``<suite>.<gate>``: where a gate was measured, then its name (docs/warehouse.md,
    ``verdicts``): the golden run's source (``golden``, ``cost``, ``calibration``), the
    property (its gate names carry it already), the guard suite, or ``regression``."""
    source, gate, suite = check["source"], check["gate"], check.get("suite")
    if source == "properties":
        return str(gate)
    if source in ("guard", "decguard") and suite:
        return f"{suite}.{gate}"
    return f"{source}.{gate}"


def _fixed(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _shares(counts: list[float]) -> list[float]:
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def _consistency(section: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not section:
        return []
    names = (
        "unanimous_share",
        "pairwise_agreement",
        "agreement_with_report",
        "mean_tv_distance",
        "cases_measured",
        "inconsistent_cases",
        "extra_asks",
    )
    return [(n.replace("_", " "), section.get(n)) for n in names if n in section]
