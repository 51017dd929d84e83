"""junit.xml: one suite per analyzer, one test case per cell, so CI shows attribution like tests;
and per log analyzer a suite over the cells' lives (its restart policy at every attempt). Where
cells ran under more than one workload or launcher, test cases are grouped by them too and each
suite's properties hold its pass rate per workload and launcher."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from faultloop.contracts import DIMENSIONS, Grade, Reads, ScoreRecord
from faultloop.report.history import pick_fingerprint
from faultloop.report.model import Report
from faultloop.report.placements import by_pair, placement


def junit_xml(rep: Report) -> str:
    """One suite per analyzer, one testcase per cell: failing dimensions as the failure, unscored
    cells skipped, time = time to verdict (fault to job end, plus the analyzer's wall time)."""
    root = ET.Element("testsuites", name="faultloop")
    totals: Counter[str] = Counter()
    pairs = by_pair(rep)[1]
    pairs = pairs if len(pairs) > 1 else {}  # one workload under one launcher: nothing to tell apart
    for name, rows in {**rep.log_views, **rep.fr_views}.items():
        failures = sum(1 for r in rows if r.failing())
        skipped = sum(1 for r in rows if not r.scored)
        seconds = sum(r.time_to_verdict_s or 0.0 for r in rows)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=name,
            tests=str(len(rows)),
            failures=str(failures),
            skipped=str(skipped),
            errors="0",
            time=f"{seconds:.3f}",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="analyzer_version", value=pick_fingerprint(rows, None))
        for (workload, launcher), rates in pairs.items():
            ET.SubElement(props, "property", name=f"pass_rate.{workload}.{launcher}", value=str(rates[name]))
        for r in rows:
            where = ".".join(placement(r)) + "." if pairs else ""
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"faultloop.{name}.{where}{r.cell.fault_type}.n{r.cell.nodes}",
                name=r.cell.name,
                time=f"{r.time_to_verdict_s or 0.0:.3f}",
            )
            if not r.scored:
                ET.SubElement(case, "skipped", message=f"{r.status}: {r.reason or r.notes}")
            elif r.failing():
                failure = ET.SubElement(
                    case, "failure", type="attribution", message="; ".join(f"{d}={r.values[d]}" for d in r.failing())
                )
                failure.text = r.notes
        totals.update(tests=len(rows), failures=failures, skipped=skipped)
    for view in rep.views:
        totals.update(_life_suite(root, view.name, view.rows))
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _life_suite(root: ET.Element, name: str, rows: list[ScoreRecord]) -> Counter[str]:
    """A log analyzer's suite over the cells' lives (`<name>.life`): one testcase per cell, its
    decisions at every attempt failing on policy_correct or drain_correct; cells without a graded
    attempt skipped; time = its policy's cost in node-minutes (JUnit has no other unit)."""
    dims = DIMENSIONS.names(reads=(Reads.LIFE,))
    graded = [r for r in rows if r.scored and r.grade("policy_correct") != Grade.NA]
    failing = [r for r in graded if any(r.grade(d) == Grade.FALSE for d in dims)]
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"{name}.life",
        tests=str(len(rows)),
        failures=str(len(failing)),
        skipped=str(len(rows) - len(graded)),
        errors="0",
    )
    for r in rows:
        case = ET.SubElement(
            suite, "testcase", classname=f"faultloop.{name}.life.{r.cell.fault_type}", name=r.cell.name
        )
        if r not in graded:
            ET.SubElement(case, "skipped", message="no attempt failed by its fault: nothing to decide")
        elif r in failing:
            failure = ET.SubElement(
                case, "failure", type="policy", message="; ".join(f"{d}={r.grade(d)}" for d in dims)
            )
            failure.text = "; ".join(f"attempt {s.attempt}: {s.decision} (truth: {s.expected})" for s in r.life) + (
                f"; policy cost {r.policy_cost_node_min} node-minutes" if r.policy_cost_node_min is not None else ""
            )
    return Counter(tests=len(rows), failures=len(failing), skipped=len(rows) - len(graded))
