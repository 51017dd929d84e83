"""`faultloop screenshot REPORT_HTML PNG`: picture the HTML report as chromium renders it."""

from __future__ import annotations

import argparse
from pathlib import Path

from faultloop.report import browser


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop screenshot", description=__doc__)
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args(argv)
    browser.screenshot(args.html, args.png, width=args.width, height=args.height)
    print(f"{args.png}: {args.width}x{args.height} of {args.html}")
    return 0
