"""`robot-ident report`: an HTML page of a result folder (tables and plots)."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("report", help="write RESULT/report.html from a result folder",
                       description="One self-contained HTML page of a result folder (robot-ident identify or "
                                   "demo) or of a validation-only folder (robot-ident validate): the verdict "
                                   "(trusted, usable with caveats, not trusted), measured against predicted "
                                   "efforts, validation error against the noise, warnings, base parameters and "
                                   "bodies against CAD, friction fit per joint, joint-space coverage.")
    p.add_argument("--result", required=True, help="result folder")
    p.add_argument("--compare", default=None, metavar="OTHER",
                   help="another result folder shown side by side (e.g. before and after a tool change)")
    p.add_argument("--trajectory", default=None,
                   help="the designed trajectory file (robot-ident design) whose limit and collision margins "
                        "to show")
    p.add_argument("--output", default=None, help="HTML file to write (default: RESULT/report.html)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...report.html import write_html_report
    print(f"wrote {write_html_report(args.result, args.compare, args.trajectory, args.output)}")
    return 0
