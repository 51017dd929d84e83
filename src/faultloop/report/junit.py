"""junit.xml: one suite per analyzer, one test case per cell, so CI shows attribution like tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from faultloop.report.history import pick_fingerprint
from faultloop.report.model import Report


def junit_xml(rep: Report) -> str:
    """One suite per analyzer, one testcase per cell: failing dimensions as the failure, unscored
    cells skipped, time = time to verdict (fault to job end, plus the analyzer's wall time)."""
    root = ET.Element("testsuites", name="faultloop")
    totals: Counter[str] = Counter()
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
        for r in rows:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"faultloop.{name}.{r.cell.fault_type}.n{r.cell.nodes}",
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
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("skipped", str(totals["skipped"]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
