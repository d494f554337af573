"""What publishing the collection needs: its license in the tarball, a released changelog, bounded dependencies."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())


def test_the_license_file_is_the_one_galaxy_yml_declares():
    assert GALAXY["license"] == ["GPL-3.0-or-later"]
    text = (REPO / "LICENSE").read_text()
    assert text.split("\n")[0].strip() == "GNU GENERAL PUBLIC LICENSE" and "Version 3, 29 June 2007" in text
    # The path every source file's header names.
    assert (REPO / "LICENSES" / "GPL-3.0-or-later.txt").read_text() == text


def test_every_dependency_has_an_upper_bound():
    for name, spec in GALAXY["dependencies"].items():
        assert re.fullmatch(r">=[0-9.]+,<[0-9.]+", spec), (name, spec)
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.-]+>=[0-9.]+,<[0-9.]+", line.strip()), line


def test_the_galaxy_version_is_released_in_the_changelog():
    changes = yaml.safe_load((REPO / "changelogs" / "changelog.yaml").read_text())
    assert str(GALAXY["version"]) in changes["releases"]
    assert f"v{GALAXY['version']}" in (REPO / "CHANGELOG.rst").read_text()


def test_the_operator_image_carries_the_collections_galaxy_yml_declares():
    from sandbox.images import operator_image

    declared = {name.replace(".", "/") for name in GALAXY["dependencies"]}
    assert set(operator_image.DEPENDENCY_COLLECTIONS) == declared


def test_no_plugin_needs_the_kubernetes_client():
    # The collection talks to the API through module_utils/kube_api; requirements.txt stays free of the SDK.
    sources = list((REPO / "plugins").rglob("*.py"))
    assert sources
    users = [str(p.relative_to(REPO)) for p in sources
             if re.search(r"^\s*(import kubernetes|from kubernetes)", p.read_text(), re.M)]
    assert users == []
    assert not any(line.startswith("kubernetes") for line in (REPO / "requirements.txt").read_text().splitlines())


def test_nothing_the_product_ships_needs_the_kubernetes_client():
    # The operator, its binder and the kubectl plugin make every request with the collection's client.
    packages = ("operator/kubenest_operator", "operator/kubenest_binder", "kubectl/kubectl_kubenest")
    sources = [p for package in packages for p in (REPO / package).rglob("*.py")]
    assert len(sources) > 30
    users = [str(p.relative_to(REPO)) for p in sources
             if re.search(r"^\s*(import kubernetes|from kubernetes)", p.read_text(), re.M)]
    assert users == []
    for project in ("operator", "kubectl"):
        dependencies = tomllib.loads((REPO / project / "pyproject.toml").read_text())["project"]["dependencies"]
        assert not [d for d in dependencies if re.match(r"kubernetes\b", d)], project
