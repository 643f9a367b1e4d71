"""samples.npz: a compact copy of the processed identification and validation samples,
kept in the result folder so the report can draw the friction fit, the error
histograms and the joint-space coverage without the bag.

Layout (numpy ``.npz``, float32 samples, at most ``max_samples`` rows per set, taken at
a uniform stride over the whole recording)::

    format           "robot_ident/samples"      version  1
    joints           (n,) joint names           units    (n,) "N·m" or "N"
    limit_lower, limit_upper, limit_velocity, limit_effort   (n,) from the URDF (inf: none)
    <set>_t          (N,)     s                 <set> is "identification" or "validation"
    <set>_q, <set>_qd, <set>_qdd, <set>_effort, <set>_predicted   (N, n) SI units
    <set>_moving     (N, n) bool: outside the friction dead band (the samples the RMS uses)
    <set>_stride     ()       samples of the processed data per stored row

`effort` is the raw measured effort, `predicted` the identified model's effort at the
same (filtered) states. Written atomically.
"""
from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.signals import decimation_stride  # noqa: F401  (this module's interface)
from ..errors import ConfigError
from ..util.atomic import atomic_write_bytes

FORMAT = "robot_ident/samples"
VERSION = 1
FILE_NAME = "samples.npz"
SETS = ("identification", "validation")
_FIELDS = ("q", "qd", "qdd", "effort", "predicted")


@dataclass
class SampleSet:
    """One stored set (identification or validation); q/qd/qdd may be None for sets that
    only keep efforts."""

    t: np.ndarray
    effort: np.ndarray
    predicted: np.ndarray
    moving: np.ndarray
    q: np.ndarray | None = None
    qd: np.ndarray | None = None
    qdd: np.ndarray | None = None
    stride: int = 1

    @property
    def n_samples(self) -> int:
        return int(self.t.size)


@dataclass
class Samples:
    joints: tuple
    units: tuple
    limits: dict                       # lower, upper, velocity, effort: (n,) arrays
    sets: dict                         # name -> SampleSet


def sample_set(t, effort, predicted, moving, q=None, qd=None, qdd=None, max_samples: int = 3000) -> SampleSet:
    """A SampleSet decimated to at most max_samples rows (uniform stride)."""
    t = np.asarray(t, float)
    s = decimation_stride(t.size, max_samples)
    take = (lambda a: None if a is None else np.asarray(a)[::s])
    return SampleSet(t[::s], take(effort), take(predicted), np.asarray(moving, bool)[::s],
                     take(q), take(qd), take(qdd), s)


def write_samples(folder, joints, units, limits, sets: dict, file_name: str = FILE_NAME) -> Path:
    """folder/samples.npz (or file_name) from named SampleSets; limits has lower, upper, velocity, effort."""
    n = len(joints)
    arrays = {"format": np.array(FORMAT), "version": np.array(VERSION),
              "joints": np.array(list(joints)), "units": np.array(list(units))}
    for key in ("lower", "upper", "velocity", "effort"):
        arrays[f"limit_{key}"] = np.asarray(limits[key], float).reshape(n)
    for name, s in sets.items():
        if name not in SETS:
            raise ConfigError(f"sample set {name!r} is not one of {SETS}")
        if s is None:
            continue
        arrays[f"{name}_t"] = np.asarray(s.t, float)
        arrays[f"{name}_moving"] = np.asarray(s.moving, bool)
        arrays[f"{name}_stride"] = np.array(int(s.stride))
        for f in _FIELDS:
            a = getattr(s, f)
            if a is not None:
                a = np.asarray(a, float)
                if a.shape != (s.t.size, n):
                    raise ConfigError(f"sample set {name}: {f} has shape {a.shape}, expected {(s.t.size, n)}")
                arrays[f"{name}_{f}"] = a.astype(np.float32)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return atomic_write_bytes(Path(folder) / file_name, buf.getvalue())


def read_samples(folder, file_name: str = FILE_NAME) -> Samples | None:
    """folder/samples.npz (or file_name), or None when the folder has none (older results)."""
    path = Path(folder) / file_name
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["format"]) != FORMAT or int(z["version"]) != VERSION:
                raise ConfigError(f"{path} is not a robot_ident samples file version {VERSION}")
            joints = tuple(str(j) for j in z["joints"])
            units = tuple(str(u) for u in z["units"])
            limits = {k: np.asarray(z[f"limit_{k}"], float) for k in ("lower", "upper", "velocity", "effort")}
            sets = {}
            for name in SETS:
                if f"{name}_t" not in z.files:
                    continue
                get = (lambda f, name=name: np.asarray(z[f"{name}_{f}"], float) if f"{name}_{f}" in z.files else None)
                sets[name] = SampleSet(get("t"), get("effort"), get("predicted"),
                                       np.asarray(z[f"{name}_moving"], bool), get("q"), get("qd"), get("qdd"),
                                       int(z[f"{name}_stride"]))
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{path} is not a readable robot_ident samples file: {exc}") from exc
    for name, s in sets.items():
        if s.effort is None or s.predicted is None or s.effort.shape != (s.t.size, len(joints)):
            raise ConfigError(f"{path}: set {name} lacks effort/predicted samples for joints {list(joints)}")
    return Samples(joints, units, limits, sets)


VALIDATION_FILE = "validation_samples.npz"


def is_samples_file(path) -> bool:
    """A samples file `write_samples` wrote (its format)."""
    with np.load(path, allow_pickle=False) as z:
        return "format" in z.files and str(z["format"]) == FORMAT


def _limits_units(model):
    lim = model.limits
    units = ["N" if model.is_prismatic(j) else "N·m" for j in model.joint_names]
    return units, {"lower": lim.lower, "upper": lim.upper, "velocity": lim.velocity, "effort": lim.effort}


def write_validation_samples(folder, model, data, predicted, moving, max_samples: int = 3000) -> Path:
    """folder/validation_samples.npz of `robot-ident validate` (its own file: the
    identification's samples.npz stays as it is)."""
    units, limits = _limits_units(model)
    return write_samples(folder, model.joint_names, units, limits,
                         {"validation": sample_set(data.t, data.effort_raw, predicted, moving, data.q, data.qd,
                                                   data.qdd, max_samples)}, file_name=VALIDATION_FILE)


def write_run_samples(folder, model, result, ident_data, valid_data=None, ident_predicted=None,
                      max_samples: int = 3000) -> Path:
    """samples.npz of an identification run: the processed identification data (and the
    held-out validation data when given) with the result's predicted efforts and the
    dead-band mask of the result's own settings (moving_threshold, reversal_guard_s)."""
    thr = float(result.extra.get("moving_threshold", 0.0))
    guard = float(result.extra.get("reversal_guard_s", 0.0))
    sets = {}
    for name, data, pred in (("identification", ident_data, ident_predicted), ("validation", valid_data, None)):
        if data is None or data.n_samples == 0:
            continue
        if pred is None:
            pred = result.predict(model, data.q, data.qd, data.qdd)
        sets[name] = sample_set(data.t, data.effort_raw, pred, data.moving_mask(thr, guard),
                                data.q, data.qd, data.qdd, max_samples)
    units, limits = _limits_units(model)
    return write_samples(folder, model.joint_names, units, limits, sets)
