"""Plots of measured versus predicted effort (matplotlib, no display needed)."""
from __future__ import annotations

import os
from pathlib import Path

from ..io.atomic import atomic_write_bytes


def plot_efforts(path: str | Path, t, measured, predicted, joint_names, title: str, units=None) -> Path:
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(joint_names)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n + 0.8), sharex=True, squeeze=False)
    for k, ax in enumerate(axes[:, 0]):
        ax.plot(t, measured[:, k], lw=0.6, color="0.55", label="measured")
        ax.plot(t, predicted[:, k], lw=1.0, color="C0", label="predicted")
        ax.plot(t, measured[:, k] - predicted[:, k], lw=0.6, color="C3", label="error")
        unit = units[k] if units else "N·m"
        ax.set_ylabel(f"{joint_names[k]}\n[{unit}]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def _table(header, rows) -> str:
    import html
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _load_yaml(path: Path, what: str) -> dict:
    import yaml

    from ..errors import ConfigError
    from ..util.yaml_strict import safe_load_strict, yaml_error_line
    try:
        d = safe_load_strict(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({yaml_error_line(exc)}): a truncated or corrupt {what}") from None
    if not isinstance(d, dict) or not d:
        raise ConfigError(f"{path} is empty or not a mapping: a truncated or corrupt {what}")
    return d


def write_html_report(folder: str | Path, output: str | Path | None = None) -> Path:
    """report.html of a result folder (summary, validation, base parameters, plots); written
    to `output` (default DIR/report.html), whose folder is checked before any work. A
    truncated or corrupt result.yaml or validation.yaml is a one-line `ConfigError`."""
    import html

    from ..errors import ConfigError
    from ..io.atomic import atomic_write_text
    from ..io.staging import OutputError, check_writable_path
    folder = Path(folder)
    out = Path(output) if output is not None else folder / "report.html"
    if out.is_dir():
        raise OutputError(f"output {out} is a folder; give a file name (e.g. {out}/report.html)")
    check_writable_path(out)
    path = folder / "result.yaml"
    if not path.is_file():
        raise ConfigError(f"no result.yaml in {folder}")
    d = _load_yaml(path, "result")
    from ..io.results import check_complete
    check_complete(d, path)
    rel = Path(os.path.relpath(folder, out.parent)) if out.parent.resolve() != folder.resolve() else Path(".")
    fmt = lambda x: f"{x:.6g}" if isinstance(x, (int, float)) else str(x)  # noqa: E731
    where = path
    try:
        parts = [f"<h1>robot_ident result: {html.escape(str(d.get('method')))}</h1>",
                 _table(["robot", "joints", "samples", "equations", "condition number", "base parameters"],
                        [[d["robot"]["urdf"], ", ".join(d["robot"]["joints"]), d["samples"], d["equations"],
                          fmt(d["condition_number"]), len(d["base_parameters"])]])]
        q = d.get("model_quality")
        if isinstance(q, dict) and not q.get("good", True):
            parts.append("<p style='color:#b00'><b>Not a good model:</b> "
                         + html.escape("; ".join(map(str, q.get("reasons", [])))) + "</p>")
        warns = (d.get("input_checks") or {}).get("warnings") or []
        if warns:
            parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{html.escape(str(w))}</li>" for w in warns)
                         + "</ul>")
        for name in ("validation.yaml",):
            if (folder / name).is_file():
                where = folder / name
                v = _load_yaml(where, "validation file")
                parts.append(f"<h2>Validation on {html.escape(str(v.get('bag')))}</h2>")
                parts.append(_table(["joint", "RMS", "relative RMS", "ratio", "samples"],
                                    [[j, fmt(x["rms"]), f"{100 * x['relative_rms']:.2f} %",
                                      fmt(x.get("rms_over_noise_std", "-")), x["samples"]]
                                     for j, x in v["joints"].items()]))
        where = path
        if d.get("validation"):
            parts.append("<h2>Validation (held out)</h2>")
            parts.append(_table(["joint", "RMS", "relative RMS", "samples"],
                                [[j, fmt(x["rms"]), f"{100 * x['relative_rms']:.2f} %", x["samples"]]
                                 for j, x in d["validation"]["joints"].items()]))
        for png in ("validation_efforts.png", "identification_efforts.png"):
            if (folder / png).is_file():
                parts.append(f'<h2>{png[:-4].replace("_", " ")}</h2>'
                             f'<img src="{html.escape(str(rel / png))}" style="max-width:100%">')
        parts.append("<h2>Base parameters</h2>")
        parts.append(_table(["name", "value", "std", "relative std"],
                            [[p["name"], fmt(p["value"]), fmt(p["std"]), f"{fmt(p['relative_std_percent'])} %"]
                             for p in d["base_parameters"]]))
        if d.get("actuators"):
            parts.append("<h2>Actuator parameters (base parameters by themselves)</h2>")
            parts.append(_table(["joint", "parameter", "value", "std"],
                                [[j, s, fmt(v["value"]), fmt(v["std"])] for j, syms in d["actuators"].items()
                                 for s, v in syms.items()]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"key {exc.args[0]!r} is missing" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"{where} is not a complete robot_ident file ({what})") from None
    style = ("<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}</style>")
    text = f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>robot_ident result</title>{style}</head>" \
           f"<body>{''.join(parts)}</body></html>\n"
    return atomic_write_text(out, text)
