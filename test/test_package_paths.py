"""Issue 29: one package-path resolution (util/package_paths.py) for every command that reads
meshes: the folders given, the folders above the URDF, ROS_PACKAGE_PATH, AMENT_PREFIX_PATH's
share folders and the ament index, in that order; a mesh not found names every place searched."""
from __future__ import annotations

from pathlib import Path

import pytest

from robot_ident.util.package_paths import ABOVE_URDF, resolve_meshes, resolve_resource

URI = "package://my_arm/meshes/link.stl"


@pytest.fixture(autouse=True)
def no_ros_environment(monkeypatch):
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)


def package(root: Path, name: str = "my_arm") -> Path:
    """<root>/<name>/meshes/link.stl (the file's content is never read here)."""
    mesh = root / name / "meshes" / "link.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_text("solid link\nendsolid link\n")
    return mesh


def test_a_package_uri_is_found_through_a_folder_given(tmp_path):
    mesh = package(tmp_path / "given")
    assert resolve_resource(URI, [tmp_path / "given"]).path == str(mesh.resolve())
    # a folder that is the package itself works too
    assert resolve_resource(URI, [tmp_path / "given" / "my_arm"]).path == str(mesh.resolve())


def test_a_package_uri_is_found_in_a_folder_above_the_urdf(tmp_path):
    mesh = package(tmp_path / "ws" / "share")
    urdf_dir = tmp_path / "ws" / "share" / "my_arm" / "urdf"
    urdf_dir.mkdir()
    assert resolve_resource(URI, (), str(urdf_dir)).path == str(mesh.resolve())
    # only ABOVE_URDF folders are walked: a package further up is not found
    deep = urdf_dir.joinpath(*["d"] * ABOVE_URDF)
    deep.mkdir(parents=True)
    assert resolve_resource(URI, (), str(deep)).path is None


def test_a_package_uri_is_found_through_ros_package_path(tmp_path, monkeypatch):
    mesh = package(tmp_path / "ros")
    assert resolve_resource(URI).path is None
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"{tmp_path / 'nothing'}:{tmp_path / 'ros'}")
    assert resolve_resource(URI).path == str(mesh.resolve())


def test_a_package_uri_is_found_in_an_ament_prefix_share_folder(tmp_path, monkeypatch):
    mesh = package(tmp_path / "install" / "share")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "install"))
    assert resolve_resource(URI).path == str(mesh.resolve())


def test_the_folders_given_come_first(tmp_path, monkeypatch):
    given = package(tmp_path / "given")
    package(tmp_path / "ros")
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ros"))
    assert resolve_resource(URI, [tmp_path / "given"]).path == str(given.resolve())


def test_a_mesh_not_found_names_every_place_searched(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ros"))
    urdf_dir = tmp_path / "urdf"
    urdf_dir.mkdir()
    found = resolve_resource(URI, [tmp_path / "given"], str(urdf_dir))
    assert found.path is None
    text = "; ".join(found.searched)
    for place in (f"folders given ({tmp_path / 'given'})", f"the URDF's folder and those above it ({urdf_dir}",
                  f"ROS_PACKAGE_PATH ({tmp_path / 'ros'})", "AMENT_PREFIX_PATH share folders (none)", "ament index"):
        assert place in text, (place, text)


def test_relative_and_file_paths(tmp_path):
    mesh = tmp_path / "meshes" / "link.stl"
    mesh.parent.mkdir()
    mesh.write_text("solid\n")
    (tmp_path / "urdf").mkdir()
    assert resolve_resource("../meshes/link.stl", (), str(tmp_path / "urdf")).path == str(mesh.resolve())
    assert resolve_resource("meshes/link.stl", [tmp_path], str(tmp_path / "urdf")).path == str(mesh.resolve())
    assert resolve_resource(f"file://{mesh}").path == str(mesh)
    assert resolve_resource("meshes/none.stl", (), str(tmp_path)).path is None


def test_a_urdfs_meshes_are_made_absolute_and_the_missing_ones_listed(tmp_path):
    mesh = package(tmp_path)
    xml = ('<robot name="r"><link name="a"><collision><geometry><mesh filename="%s"/></geometry></collision>'
           '<visual><geometry><mesh filename="package://other/x.stl"/></geometry></visual></link></robot>' % URI)
    out, missing = resolve_meshes(xml, "collision", [tmp_path])
    assert not missing and str(mesh.resolve()) in out
    out, missing = resolve_meshes(xml, "visual", [tmp_path])
    assert [(m.link, m.filename) for m in missing] == [("a", "package://other/x.stl")]
    assert "mesh 'package://other/x.stl' of link 'a' not found; searched folders given" in missing[0].describe()
