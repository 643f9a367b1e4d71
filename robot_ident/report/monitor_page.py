"""monitor.html: the page of a `robot-ident monitor` folder -- the model's health, the
bands the contacts were judged against, the events, and the external torques over time
(monitor.png). Self-contained, like report.html (report/page.py)."""
from __future__ import annotations

from pathlib import Path

import yaml

from .page import CHECK_SCRIPT, STYLE, _Raw, esc, fmt, img, table


def monitor_html(doc: dict, png: bytes | None) -> str:
    h = doc.get("health") or {}
    level = h.get("level", "OK")
    cls = {"OK": "good", "WARN": "warn", "ERROR": "bad"}.get(level, "")
    parts = [f"<h1>robot_ident monitor: {esc(doc.get('bag', ''))}</h1>",
             f"<p class='caption'>Result {esc(doc.get('result', ''))}; {fmt(doc.get('duration_s'))} s, "
             f"{doc.get('samples', 0)} samples</p>",
             f"<h2 id='health'>Model health: <span class='{cls}'>{esc(level)}</span></h2>"]
    findings = h.get("findings") or []
    parts.append("<ul>" + "".join(f"<li><b>{esc(f['level'])}</b> {esc(f['joint'])}: {esc(f['reason'])}</li>"
                                  for f in findings) + "</ul>" if findings else "<p>No finding.</p>")
    ratio = h.get("residual_ratio") or {}
    fric = h.get("friction_change") or {}
    joints = [j for j, v in (doc.get("band") or {}).items() if isinstance(v, dict)]
    rows = []
    for j in joints:
        b = doc["band"][j]
        f = fric.get(j) or {}
        rows.append((j, b.get("band"), b.get("threshold"), b.get("model"), b.get("observer_rms"), ratio.get(j),
                     f.get("Fc"), f.get("Fv")))
    parts.append("<h2 id='bands'>Bands and drift</h2>" + table(
        ["joint", "band", "contact threshold", "model's residual RMS", "observer RMS (calibration)",
         "residual / band (last window)", "Coulomb change", "viscous change"], rows))
    pc = h.get("payload_change") or {}
    if pc:
        parts.append(f"<p>Payload change at the last body: {fmt(pc.get('mass'))} kg "
                     f"(std {fmt(pc.get('mass_std'))} kg).</p>")
    parts.append(f"<p class='caption'>{esc((doc.get('band') or {}).get('note', ''))}; a contact starts above "
                 "the contact threshold (plus the friction slack in the dead band).</p>")
    events = doc.get("events") or []
    band = {j: (doc["band"][j] or {}).get("band") for j in joints}
    parts.append(f"<h2 id='events'>Contact events ({len(events)})</h2>" + (table(
        ["joint", "start [s]", "end [s]", "duration [s]", "peak", "peak / band"],
        [(e["joint"], e["start"], e["end"], e["end"] - e["start"], e["peak"],
          _Raw(f"{fmt(abs(e['peak']) / band[e['joint']], 3)}") if band.get(e["joint"]) else None)
         for e in events]) if events else "<p>No contact.</p>"))
    if png is not None:
        parts.append("<h2 id='torques'>External torques</h2>" + img(png, "external torque estimates over time"))
    parts.append("<p id='render-check'></p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>robot_ident monitor</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}{CHECK_SCRIPT}</body></html>\n")


def write_monitor_page(folder) -> Path:
    """folder/monitor.html from folder/events.yaml and folder/monitor.png."""
    from ..util.atomic import atomic_write_text
    folder = Path(folder)
    doc = yaml.safe_load((folder / "events.yaml").read_text(encoding="utf-8"))
    png = (folder / "monitor.png").read_bytes() if (folder / "monitor.png").is_file() else None
    return atomic_write_text(folder / "monitor.html", monitor_html(doc, png))
