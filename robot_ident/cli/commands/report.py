"""`robot-ident report`: an HTML page of a result folder (tables and plots)."""
from __future__ import annotations

from ...report.html import write_html_report


def add_parser(sub):
    p = sub.add_parser("report", help="write DIR/report.html from a result folder",
                       description="Summary, validation tables, plots and base parameters of a result folder "
                                   "(robot-ident identify or demo) as one HTML page.")
    p.add_argument("--result", required=True, help="result folder")
    p.add_argument("--output", default=None, help="HTML file to write (default: DIR/report.html)")
    p.set_defaults(func=run)


def run(args) -> int:
    print(f"wrote {write_html_report(args.result, args.output)}")
    return 0
