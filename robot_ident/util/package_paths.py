"""Where a URDF's mesh files are: the one resolution of ``package://``, ``file://``, absolute
and relative mesh paths, used by every command that reads meshes (the collision checks of
design and simulate, the physical bounds of identify).

``package://<pkg>/<rest>`` is looked up, in this order, in

1. the folders given (``--package-dir``, then the config's ``excitation.collision.package_dirs``),
2. the URDF's folder and the folders above it (`ABOVE_URDF` in all: a URDF inside its
   package's tree finds its own package),
3. ``ROS_PACKAGE_PATH``,
4. the ``share`` folder of every ``AMENT_PREFIX_PATH`` prefix,
5. the ament index (``ament_index_python``, when it can be imported),

as ``<dir>/<pkg>/<rest>``, or ``<dir>/<rest>`` for a folder that *is* the package (named
``<pkg>``). A relative path is relative to the URDF's folder (the current folder for a URDF
given as text), then to each folder given. ``file://`` and absolute paths are taken as they
are. Resolving here (rather than inside Pinocchio) lets a missing mesh be reported with every
place searched (`Resolved.searched`).
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ABOVE_URDF = 6          # the URDF's folder and the folders above it searched for package:// meshes


@dataclass(frozen=True)
class Resolved:
    path: str | None            # the absolute file, None when not found
    searched: tuple[str, ...]   # the places searched, one entry per source ("ROS_PACKAGE_PATH (unset)")


@dataclass(frozen=True)
class MissingMesh:
    link: str
    filename: str
    searched: tuple[str, ...]

    def describe(self) -> str:
        return f"mesh {self.filename!r} of link {self.link!r} not found; searched {'; '.join(self.searched)}"


def urdf_folder(label) -> str | None:
    """The folder of a URDF given by its file name (None for a URDF given as text)."""
    return str(Path(label).resolve().parent) if label and os.path.isfile(str(label)) else None


def _env_dirs(var: str) -> list[str]:
    return [d for d in os.environ.get(var, "").split(os.pathsep) if d]


def search_sources(package_dirs=(), urdf_dir: str | None = None) -> list[tuple[str, list[str]]]:
    """(source, folders) in search order, for package:// paths (the ament index apart)."""
    above = []
    if urdf_dir:
        p = Path(urdf_dir).resolve()
        for _ in range(ABOVE_URDF):
            above.append(str(p))
            if p.parent == p:
                break
            p = p.parent
    return [("folders given", [str(d) for d in package_dirs]),
            ("the URDF's folder and those above it", above),
            ("ROS_PACKAGE_PATH", _env_dirs("ROS_PACKAGE_PATH")),
            ("AMENT_PREFIX_PATH share folders", [str(Path(d) / "share") for d in _env_dirs("AMENT_PREFIX_PATH")])]


def _summary(source: str, dirs: list[str]) -> str:
    if not dirs:
        return f"{source} (none)"
    if len(dirs) > 3:
        return f"{source} ({dirs[0]} ... {dirs[-1]}, {len(dirs)} folders)"
    return f"{source} ({', '.join(dirs)})"


def _ament_share(pkg: str) -> tuple[str | None, str]:
    """The package's share folder from the ament index, and how the index answered."""
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return None, "ament index (ament_index_python not importable: ROS 2 not sourced)"
    try:
        return get_package_share_directory(pkg), "ament index"
    except Exception:  # noqa: BLE001 - PackageNotFoundError, or a broken environment
        return None, f"ament index (no package {pkg!r})"


def resolve_resource(filename: str, package_dirs=(), urdf_dir: str | None = None) -> Resolved:
    """The absolute file a URDF's mesh `filename` names (see the module doc), or None with
    the places searched."""
    if filename.startswith("package://"):
        pkg, _, sub = filename[len("package://"):].partition("/")
        searched = []
        for source, dirs in search_sources(package_dirs, urdf_dir):
            for d in dirs:
                for cand in (Path(d) / pkg / sub, Path(d) / sub if Path(d).name == pkg else None):
                    if cand is not None and cand.is_file():
                        return Resolved(str(cand.resolve()), tuple(searched + [_summary(source, dirs)]))
            searched.append(_summary(source, dirs))
        share, how = _ament_share(pkg)
        searched.append(how)
        if share is not None and (Path(share) / sub).is_file():
            return Resolved(str((Path(share) / sub).resolve()), tuple(searched))
        return Resolved(None, tuple(searched))
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    p = Path(os.path.expanduser(filename))
    if p.is_absolute():
        return Resolved(str(p) if p.is_file() else None, (str(p),))
    bases = [urdf_dir or os.getcwd()] + [str(d) for d in package_dirs]
    for base in bases:
        if (Path(base) / p).is_file():
            return Resolved(str((Path(base) / p).resolve()), tuple(bases))
    return Resolved(None, (f"relative to {', '.join(bases)}",))


def resolve_meshes(xml: str, element: str, package_dirs=(), urdf_dir: str | None = None) -> tuple[str, list]:
    """The URDF text with the mesh filenames inside every link's `element` (collision or
    visual) made absolute, and the `MissingMesh`es (in link order) that were not found.
    ET.ParseError for text that is not XML."""
    root = ET.fromstring(xml)
    missing = []
    for link in root.findall("link"):
        for el in link.findall(element):
            for mesh in el.iter("mesh"):
                fn = mesh.get("filename") or ""
                found = resolve_resource(fn, package_dirs, urdf_dir) if fn else Resolved(None, ("no filename",))
                if found.path is None:
                    missing.append(MissingMesh(str(link.get("name")), fn, found.searched))
                else:
                    mesh.set("filename", found.path)
    return ET.tostring(root, encoding="unicode"), missing
