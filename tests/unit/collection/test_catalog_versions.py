"""Which Kubernetes versions have control-plane images: read from the local image catalog, never guessed."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.catalog_versions import catalog_versions


def _catalog(tmp_path, tags):
    catalog = {c: {"ref": f"kubenest.local/{c}:{tags.get(c, 'v1.36.3')}"}
               for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")}
    (tmp_path / "images.json").write_text(json.dumps(catalog))
    return str(tmp_path)


def test_the_catalogs_version_for_its_repository(tmp_path):
    assert catalog_versions("kubenest.local", _catalog(tmp_path, {})) == ["v1.36.3"]


def test_a_version_only_some_components_have_is_not_available(tmp_path):
    assert catalog_versions("kubenest.local", _catalog(tmp_path, {"kube-scheduler": "v1.35.0"})) == []


@pytest.mark.parametrize("repository", ["registry.example.com", "kubenest.local/mirror"])
def test_another_repository_is_unknown(tmp_path, repository):
    assert catalog_versions(repository, _catalog(tmp_path, {})) == []


def test_no_directory_or_no_catalog_is_unknown(tmp_path):
    assert catalog_versions("kubenest.local", "") == []
    assert catalog_versions("kubenest.local", str(tmp_path)) == []


def test_a_broken_catalog_is_an_error(tmp_path):
    (tmp_path / "images.json").write_text("{not json")
    with pytest.raises(AnsibleFilterError, match="cannot be read"):
        catalog_versions("kubenest.local", str(tmp_path))
