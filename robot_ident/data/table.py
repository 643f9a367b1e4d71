"""Recordings from tables (CSV or NPZ) instead of rosbag2.

Column layout (SI units, one row per sample, any row order is sorted by time):

CSV -- a header line, then numbers; ``#`` starts a comment line::

    time, shoulder.position, shoulder.velocity, shoulder.effort, elbow.position, ...

* ``time``: seconds (any origin), one column;
* ``<joint>.position``: rad or m, required for every identified joint;
* ``<joint>.velocity``: rad/s or m/s, optional (all joints or none; else positions are
  differentiated);
* ``<joint>.effort`` (N*m or N) **or** ``<joint>.current`` (A, or whatever the
  joint's actuator converts): which one is read follows the config's
  ``current_source`` -- ``effort`` reads ``.effort`` columns as joint efforts, the
  other sources read ``.current`` columns and convert them by the actuators and the
  coupled transmissions (`model.transmission.Drive`).

Other columns (other joints, other signals) are ignored. Empty cells or ``nan`` are
missing values: the sample is dropped for that stream, as for bags.

NPZ -- arrays ``time`` (N,), ``joint_names`` (n,) strings, ``position`` (N, n), and
optionally ``velocity`` (N, n), ``effort`` (N, n) and/or ``current`` (N, n); columns
follow ``joint_names``.

The table becomes two `JointStream`s (states; efforts or currents) with the same
stamps and goes through `sync.synchronise` like a bag: gaps split it into segments,
jittery stamps are resampled onto a uniform grid, and the same report says what
was dropped.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import SignalError
from .joint_stream import JointStream
from .sync import SyncOptions, SyncResult, synchronise

TABLE_SUFFIXES = (".csv", ".npz")


class TableError(SignalError):
    """A table that cannot be read as a recording (names the file and the column)."""


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r and not r[0].lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise TableError(f"cannot read table {path}: {exc}") from exc
    if len(rows) < 2:
        raise TableError(f"table {path}: needs a header line and at least one row of numbers")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise TableError(f"table {path}: column(s) {', '.join(dup)} appear twice in the header")
    data = np.full((len(rows) - 1, len(header)), np.nan)
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise TableError(f"table {path}: line {i + 2} has {len(row)} cells, the header has {len(header)}")
        for k, cell in enumerate(row):
            cell = cell.strip()
            if cell == "":
                continue
            try:
                data[i, k] = float(cell)
            except ValueError:
                raise TableError(f"table {path}: line {i + 2}, column {header[k]!r}: "
                                 f"{cell!r} is not a number") from None
    return header, data


def _csv_columns(path: Path, joints: Sequence[str], value_field: str):
    header, data = _read_csv(path)
    col = {h: k for k, h in enumerate(header)}
    if "time" not in col:
        raise TableError(f"table {path}: no 'time' column (seconds); columns: {', '.join(header)}")

    def block(field: str, required: bool):
        names = [f"{j}.{field}" for j in joints]
        present = [n in col for n in names]
        if not any(present):
            if required:
                raise TableError(f"table {path}: no column {names[0]!r}; the table needs "
                                 f"'<joint>.{field}' for every identified joint")
            return None
        if not all(present):
            missing = [n for n, p in zip(names, present) if not p]
            raise TableError(f"table {path}: column {missing[0]!r} is missing (the other joints have "
                             f"'.{field}' columns)")
        return data[:, [col[n] for n in names]]

    return (data[:, col["time"]], block("position", True), block("velocity", False),
            block(value_field, True))


def _npz_columns(path: Path, joints: Sequence[str], value_field: str):
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise TableError(f"cannot read table {path}: {exc}") from exc
    for key in ("time", "joint_names", "position", value_field):
        if key not in arrays:
            raise TableError(f"table {path}: no array {key!r}; arrays: {', '.join(sorted(arrays))}")
    names = [str(n) for n in np.atleast_1d(arrays["joint_names"])]
    missing = [j for j in joints if j not in names]
    if missing:
        raise TableError(f"table {path}: joint {missing[0]!r} is not in joint_names ({', '.join(names)})")
    idx = [names.index(j) for j in joints]
    t = np.asarray(arrays["time"], dtype=float)
    if t.ndim != 1:
        raise TableError(f"table {path}: 'time' must be one-dimensional, got shape {t.shape}")

    def block(key: str):
        if key not in arrays:
            return None
        a = np.asarray(arrays[key], dtype=float)
        if a.shape != (t.size, len(names)):
            raise TableError(f"table {path}: {key!r} must have shape ({t.size}, {len(names)}) "
                             f"(time x joint_names), got {a.shape}")
        return a[:, idx]

    return t, block("position"), block("velocity"), block(value_field)


def read_table_streams(path: str | os.PathLike, joints: Sequence[str], value_field: str = "effort"
                       ) -> tuple[JointStream, JointStream]:
    """(states, values) streams of `joints` from a CSV or NPZ table; `value_field` is
    ``effort`` or ``current``."""
    p = Path(path)
    if not p.is_file():
        raise TableError(f"table file not found: {p}")
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise TableError(f"table {p}: unknown format {p.suffix!r}; expected {' or '.join(TABLE_SUFFIXES)}")
    if value_field not in ("effort", "current"):
        raise TableError(f"table value field must be 'effort' or 'current', got {value_field!r}")
    reader = _csv_columns if p.suffix.lower() == ".csv" else _npz_columns
    t, q, qd, val = reader(p, list(joints), value_field)
    if t.size < 3:
        raise TableError(f"table {p}: {t.size} row(s); a recording needs at least 3")
    bad = ~np.isfinite(t)
    if bad.any():
        raise TableError(f"table {p}: 'time' is missing or not finite in row {int(np.flatnonzero(bad)[0]) + 1}")
    order = np.argsort(t, kind="stable")
    t, q, val = t[order], q[order], val[order]
    qd = None if qd is None else qd[order]
    label = f"{p.name}"
    fields = {"position": q}
    if qd is not None:
        fields["velocity"] = qd
    states = JointStream(f"{label} (states)", t, tuple(joints), fields)
    values = JointStream(f"{label} ({value_field})", t, tuple(joints), {value_field: val})
    return states, values


def read_table(path: str | os.PathLike, joints: Sequence[str], drive=None, *, value_field: str = "effort",
               options: SyncOptions | None = None) -> SyncResult:
    """Segments of `signals.Recording` with joint efforts from a table. With
    ``value_field='current'`` the currents are converted by `drive` (an
    `ActuatorSet` or a `transmission.Drive`)."""
    states, values = read_table_streams(path, joints, value_field)
    if value_field == "current" and drive is None:
        raise TableError(f"table {path}: currents need actuators to become efforts")
    res = synchronise(states, values, list(joints), options=options, effort_field=value_field,
                      meta={"table": str(path)})
    if value_field == "current":
        d = drive.for_joints(list(joints))
        return SyncResult([d.apply(r) for r in res.segments], res.report)
    return res


def write_table(path: str | os.PathLike, recording, value_field: str = "effort") -> Path:
    """Write a `signals.Recording` as a CSV or NPZ table in the layout above (for tests,
    conversions and examples). The recording's effort array goes to `value_field`."""
    from ..util.atomic import atomic_write_bytes, atomic_write_text

    p = Path(path)
    joints = list(recording.joint_names)
    if p.suffix.lower() == ".npz":
        import io

        buf = io.BytesIO()
        arrays = {"time": recording.t, "joint_names": np.array(joints), "position": recording.q,
                  value_field: recording.effort}
        if recording.qd is not None:
            arrays["velocity"] = recording.qd
        np.savez(buf, **arrays)
        return atomic_write_bytes(p, buf.getvalue())
    if p.suffix.lower() != ".csv":
        raise TableError(f"table {p}: unknown format {p.suffix!r}; expected {' or '.join(TABLE_SUFFIXES)}")
    cols = ["time"] + [f"{j}.position" for j in joints]
    blocks = [recording.t[:, None], recording.q]
    if recording.qd is not None:
        cols += [f"{j}.velocity" for j in joints]
        blocks.append(recording.qd)
    cols += [f"{j}.{value_field}" for j in joints]
    blocks.append(recording.effort)
    data = np.hstack(blocks)
    lines = [",".join(cols)] + [",".join(f"{v:.10g}" for v in row) for row in data]
    return atomic_write_text(p, "\n".join(lines) + "\n")
