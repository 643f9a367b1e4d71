"""Plausibility bounds of the bodies for the physically consistent estimate.

Configured in the parameter file (every key optional; the defaults are shown):

    identification:
      physical:
        prior_relative_std: 0.25   # how far from CAD a body may plausibly be (see physical.py)
        mass_ratio: [0.5, 2.0]     # per-body mass range, times the CAD mass
        mass_absolute: null        # [min, max] kg for bodies whose CAD mass is below 1 g
                                   # (null: [0, total CAD mass of the moving bodies, at least 1 kg])
        total_mass: null           # [min, max] kg of all moving bodies, or null
        com_region: geometry       # geometry | sphere | none
        com_radius: null           # m, sphere radius when there is no geometry (null: from kinematics)
        geometry_margin: 0.02      # m added to each side of a geometry bounding box
        bodies:                    # per-body overrides, keyed by the body's joint
          wrist_3: {mass: [0.2, 3.0], com_radius: 0.25}

The centre-of-mass region of a body (the child link of its joint plus everything
rigidly attached) is, for `com_region: geometry`, the bounding box of its collision
geometry (visual geometry when it has no collision geometry; meshes are read with
Pinocchio/coal), padded by `geometry_margin`; a body without geometry, or
`com_region: sphere`, gets a sphere about its joint origin of radius `com_radius`, by
default 1.2 x the farthest of its frames (child joints, attached links) and its CAD
centre of mass, plus 5 cm. The region is grown when needed so that the CAD body lies
strictly inside it. A payload outside the link's geometry needs a per-body override.

Constraints (linear in the standard parameters, so the interior-point solver takes
them as they are): m_min <= m <= m_max per body; the total mass; for a box, the
centre of mass inside it (m lo_i <= h_i <= m hi_i) and the mass distribution
realisable inside the box's circumscribed ellipsoid, tr(J Q) >= 0 (Wensing, Kim &
Slotine 2017); for a sphere, the same ellipsoid condition, which also bounds the
centre of mass. Together they rule out the absurd bodies of issue 12 (hundreds of
kilograms where the CAD says 2.7, a 10 g link with its centre of mass 2.3 m away).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..util.config_keys import check_keys

TINY_MASS = 1e-3        # kg: below this the CAD mass is treated as unknown (absolute range)
SPHERE_PAD = 0.05       # m, added to the kinematic sphere radius
SPHERE_FACTOR = 1.2


@dataclass(frozen=True)
class PhysicalBounds:
    prior_relative_std: float = 0.25
    mass_ratio: tuple = (0.5, 2.0)
    mass_absolute: tuple | None = None
    total_mass: tuple | None = None
    com_region: str = "geometry"
    com_radius: float | None = None
    geometry_margin: float = 0.02
    bodies: Mapping = field(default_factory=dict)   # joint -> {"mass": (lo, hi), "com_radius": r}


@dataclass
class BodyRegion:
    kind: str                 # "box" or "sphere"
    center: np.ndarray        # (3,) in the body's joint frame
    half: np.ndarray          # (3,) box half extents, or (r, r, r)
    source: str               # collision | visual | kinematics | config
    grown: bool = False       # enlarged to hold the CAD body

    def ellipsoid_Q(self) -> np.ndarray:
        """Q with tr(J Q) >= 0 <=> the mass can lie inside the region's (circumscribed) ellipsoid."""
        semi = self.half * (math.sqrt(3.0) if self.kind == "box" else 1.0)
        A = np.diag(1.0 / semi ** 2)
        Q = np.zeros((4, 4))
        Q[:3, :3] = -A
        Q[:3, 3] = Q[3, :3] = A @ self.center
        Q[3, 3] = 1.0 - self.center @ A @ self.center
        return Q

    def as_dict(self) -> dict:
        d = {"kind": self.kind, "source": self.source, "center": [float(v) for v in self.center]}
        d["half_extent" if self.kind == "box" else "radius"] = ([float(v) for v in self.half]
                                                               if self.kind == "box" else float(self.half[0]))
        if self.grown:
            d["grown_to_hold_cad"] = True
        return d


# ------------------------------------------------------------------------ config
_KEYS = {"prior_relative_std", "mass_ratio", "mass_absolute", "total_mass", "com_region", "com_radius",
         "geometry_margin", "bodies"}
_BODY_KEYS = {"mass", "com_radius"}       # bodies.<joint>


def _pair(v, where: str, allow_none: bool = False):
    if v is None and allow_none:
        return None
    if (not isinstance(v, (list, tuple)) or len(v) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
            or not 0 <= v[0] < v[1]):
        raise ConfigError(f"{where}: expected [min, max] with 0 <= min < max, got {v!r}")
    return (float(v[0]), float(v[1]))


def _positive(v, where: str, allow_none: bool = False):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{where}: expected a positive number, got {v!r}")
    return float(v)


def parse_physical_bounds(section, where: str = "identification.physical") -> PhysicalBounds:
    """The `identification: physical:` section (every key optional)."""
    if section is None:
        return PhysicalBounds()
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {section!r}")
    check_keys(section, _KEYS, where)
    d = PhysicalBounds()
    region = section.get("com_region", d.com_region)
    if region not in ("geometry", "sphere", "none"):
        raise ConfigError(f"{where}.com_region: expected geometry, sphere or none, got {region!r}")
    bodies = {}
    raw = section.get("bodies") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}.bodies: expected a mapping joint -> {{mass, com_radius}}, got {raw!r}")
    for joint, spec in raw.items():
        w = f"{where}.bodies.{joint}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{w}: expected a mapping with keys mass and/or com_radius, got {spec!r}")
        check_keys(spec, _BODY_KEYS, w)
        bodies[str(joint)] = {k: (_pair(v, f"{w}.mass") if k == "mass" else _positive(v, f"{w}.com_radius"))
                              for k, v in spec.items()}
    margin = section.get("geometry_margin", d.geometry_margin)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0:
        raise ConfigError(f"{where}.geometry_margin: expected a number >= 0, got {margin!r}")
    return PhysicalBounds(
        prior_relative_std=_positive(section.get("prior_relative_std", d.prior_relative_std),
                                     f"{where}.prior_relative_std"),
        mass_ratio=_pair(section.get("mass_ratio", d.mass_ratio), f"{where}.mass_ratio"),
        mass_absolute=_pair(section.get("mass_absolute"), f"{where}.mass_absolute", allow_none=True),
        total_mass=_pair(section.get("total_mass"), f"{where}.total_mass", allow_none=True),
        com_region=region, com_radius=_positive(section.get("com_radius"), f"{where}.com_radius", True),
        geometry_margin=float(margin), bodies=bodies)


def check_bodies(bounds: PhysicalBounds, body_joints) -> None:
    for j in bounds.bodies:
        if j not in body_joints:
            raise ConfigError(f"identification.physical.bodies: {j!r} is not a body of the model; "
                              f"bodies (by joint): {', '.join(body_joints)}")


# ---------------------------------------------------------------------- regions
def geometry_boxes(model) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, str]], str | None]:
    """{body joint: (lo, hi, source)} bounding boxes of each body's collision (else visual)
    geometry in its joint frame, read by Pinocchio; and a note when geometry could not be read
    (the first mesh not found and the places searched). Meshes are found through the one
    package-path resolution (util/package_paths.py) with `model.mesh_dirs` (--package-dir and
    the config's excitation.collision.package_dirs) first."""
    import pinocchio as pin

    from ..util.package_paths import resolve_meshes, urdf_folder
    out: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}
    note = None
    names = list(model.layout.body_joints)
    dirs, folder = tuple(getattr(model, "mesh_dirs", ())), urdf_folder(model.urdf_label)
    for kind, label in ((pin.GeometryType.COLLISION, "collision"), (pin.GeometryType.VISUAL, "visual")):
        try:
            xml, missing = resolve_meshes(model.urdf_xml, label, dirs, folder)
            if missing:
                note = note or f"{label} geometry not read ({missing[0].describe()})"
                continue
            gm = pin.buildGeomFromUrdfString(model.model, xml, kind)
        except (ValueError, RuntimeError, SyntaxError) as exc:     # ET.ParseError is a SyntaxError
            note = note or f"{label} geometry not read ({str(exc).splitlines()[0]})"
            continue
        for go in gm.geometryObjects:
            if go.parentJoint == 0:
                continue
            body = model.model.names[go.parentJoint]
            if body not in names or (body in out and out[body][2] != label):
                continue
            geo = go.geometry
            geo.computeLocalAABB()
            lo, hi = np.array(geo.aabb_local.min_), np.array(geo.aabb_local.max_)
            corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
            pts = corners @ go.placement.rotation.T + go.placement.translation
            if body in out:
                pts = np.vstack([pts, out[body][0][None], out[body][1][None]])
            out[body] = (pts.min(axis=0), pts.max(axis=0), label)
    return out, note


def _kinematic_radius(model, body: str, com: np.ndarray) -> float:
    jid = model.model.getJointId(body)
    pts = [np.linalg.norm(com)]
    for f in model.model.frames:
        if f.parentJoint == jid:
            pts.append(np.linalg.norm(f.placement.translation))
    for j in range(1, model.model.njoints):
        if model.model.parents[j] == jid:
            pts.append(np.linalg.norm(model.model.jointPlacements[j].translation))
    return SPHERE_FACTOR * max(pts) + SPHERE_PAD


def body_regions(model, bounds: PhysicalBounds, reference: np.ndarray) -> tuple[dict[str, BodyRegion], str | None]:
    """The centre-of-mass region of every body (see the module doc), each grown where needed
    so that the reference (CAD) body of `reference` (standard parameters) lies inside."""
    from ..model.pseudo_inertia import pseudo_inertia
    layout = model.layout
    boxes, note = geometry_boxes(model) if bounds.com_region == "geometry" else ({}, None)
    if note and not boxes:
        note += "; no geometry read"          # every body gets a kinematic sphere
    regions = {}
    for b in layout.body_joints:
        th = reference[layout.inertial_slice(b)]
        com = th[1:4] / th[0] if th[0] > 0 else np.zeros(3)
        override = bounds.bodies.get(b, {}).get("com_radius")
        if override is None and b in boxes:
            lo, hi, src = boxes[b]
            lo, hi = lo - bounds.geometry_margin, hi + bounds.geometry_margin
            reg = BodyRegion("box", 0.5 * (lo + hi), 0.5 * (hi - lo), src)
        else:
            r = override or bounds.com_radius or _kinematic_radius(model, b, com)
            reg = BodyRegion("sphere", np.zeros(3), np.full(3, r), "config" if (override or bounds.com_radius)
                             else "kinematics")
        J = pseudo_inertia(th)
        for _ in range(60):           # grow by 10 % until the CAD body is strictly inside
            inside = np.trace(J @ reg.ellipsoid_Q()) > 1e-6 * max(th[0], 1e-9) * reg.half.max() ** 2
            if reg.kind == "box":
                inside &= bool(np.all(np.abs(com - reg.center) < reg.half * 0.999))
            if inside:
                break
            reg.half = reg.half * 1.1
            reg.grown = True
        regions[b] = reg
    return regions, note


def mass_range(bounds: PhysicalBounds, body: str, cad_mass: float, cad_total: float = 1.0) -> tuple[float, float]:
    """The mass bounds of one body; `cad_total` is the CAD mass of all moving bodies."""
    if "mass" in bounds.bodies.get(body, {}):
        return bounds.bodies[body]["mass"]
    if cad_mass < TINY_MASS:
        return bounds.mass_absolute or (0.0, max(1.0, cad_total))
    return (bounds.mass_ratio[0] * cad_mass, bounds.mass_ratio[1] * cad_mass)


def implausible_bodies(model, theta: np.ndarray, bounds: PhysicalBounds | None = None) -> dict[str, str]:
    """{body joint: reason} for bodies of standard parameters `theta` whose mass is outside
    the (default) mass range or whose centre of mass lies beyond twice the kinematic sphere
    radius: a guard for estimators that do not apply the bounds (identified.urdf)."""
    bounds = bounds or PhysicalBounds()
    out = {}
    for b in model.layout.body_joints:
        sl = model.layout.inertial_slice(b)
        cad, th = model.nominal[sl], theta[sl]
        lo, hi = mass_range(bounds, b, cad[0], _cad_total(model.nominal, model.layout))
        if not lo <= th[0] <= hi:
            out[b] = f"mass {th[0]:.4g} kg outside [{lo:.4g}, {hi:.4g}] kg"
            continue
        com = th[1:4] / th[0]
        cad_com = cad[1:4] / cad[0] if cad[0] > 0 else np.zeros(3)
        r = 2.0 * (bounds.bodies.get(b, {}).get("com_radius") or bounds.com_radius
                   or _kinematic_radius(model, b, cad_com))
        if np.linalg.norm(com) > r:
            out[b] = f"centre of mass {np.linalg.norm(com):.3g} m from its joint (more than {r:.3g} m)"
    return out


def _cad_total(theta: np.ndarray, layout) -> float:
    return float(sum(max(theta[layout.inertial_slice(b)][0], 0.0) for b in layout.body_joints))
