"""The version-skew policy between a kubelet and its API servers: up to three minors older, never newer."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.kubelet_skew import kubelet_skew


@pytest.mark.parametrize("kubelet, apiserver", [
    ("v1.36.3", "v1.36.3"),
    ("v1.36.9", "v1.36.0"),  # patch releases do not matter
    ("v1.35.4", "v1.36.3"),
    ("v1.33.0", "v1.36.3"),
    ("Kubernetes v1.35.4", "v1.36.3"),  # as `kubelet --version` prints it
    ("v1.36.3-rc.1+abc", "v1.36.3"),
])
def test_a_kubelet_as_new_or_up_to_three_minors_older_keeps_the_policy(kubelet, apiserver):
    assert kubelet_skew(kubelet, apiserver) == []


def test_a_kubelet_newer_than_its_api_servers_is_named_with_both_versions():
    assert kubelet_skew("v1.36.3", "v1.35.4") == ["kubelet v1.36.3 is newer than the API servers' v1.35.4"]
    assert kubelet_skew("Kubernetes v1.36.3", "v1.35.4") == ["kubelet v1.36.3 is newer than the API servers' v1.35.4"]


def test_a_kubelet_four_minors_older_breaks_the_policy():
    assert kubelet_skew("v1.32.9", "v1.36.3") == [
        "kubelet v1.32.9 is more than 3 minor versions older than the API servers' v1.36.3"]


def test_another_major_version_breaks_the_policy():
    assert kubelet_skew("v2.0.0", "v1.36.3") == ["kubelet v2.0.0 and the API servers' v1.36.3 are of different major "
                                                 "versions"]


@pytest.mark.parametrize("kubelet, apiserver, named", [
    ("", "v1.36.3", "kubelet"),
    ("v0.0.0-master+$Format:%H$", "v1.36.3", "kubelet"),  # a build without its version stamped
    ("1.36", "v1.36.3", "kubelet"),
    ("v1.36.3", "latest", "API server"),
])
def test_a_version_that_is_not_one_is_an_error_naming_which(kubelet, apiserver, named):
    with pytest.raises(AnsibleFilterError, match=f"the {named} version"):
        kubelet_skew(kubelet, apiserver)
