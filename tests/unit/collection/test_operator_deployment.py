"""The operator's Deployment with a site's image, volumes and variables, built as data from deploy/operator."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.kosmos.kubenest.plugins.filter.operator_deployment import operator_deployment

DEPLOY = Path(__file__).resolve().parents[3] / "deploy/operator"
DEPLOYMENT = yaml.safe_load((DEPLOY / "deployment.yaml").read_text())
BINDER = yaml.safe_load((DEPLOY / "binder-deployment.yaml").read_text())


def test_image_volumes_and_the_site_digest_are_set_and_the_manifest_is_untouched():
    before = yaml.safe_dump(DEPLOYMENT)
    images = {"name": "images", "persistentVolumeClaim": {"claimName": "kubenest-images", "readOnly": True}}
    tmp = {"name": "tmp", "emptyDir": {"medium": "Memory"}}
    result = operator_deployment(DEPLOYMENT, image="registry.example.com/op:2", volumes=[images, tmp],
                                 mounts=[{"name": "images", "mountPath": "/images", "readOnly": True}],
                                 site_digest="abc")
    pod = result["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.example.com/op:2"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["images"] == images and volumes["tmp"] == tmp  # a volume of the same name is replaced
    assert [v["name"] for v in pod["volumes"]].count("tmp") == 1
    assert {"name": "images", "mountPath": "/images", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert result["spec"]["template"]["metadata"]["annotations"]["kosmos.io/site-vars-sha256"] == "abc"
    assert yaml.safe_dump(DEPLOYMENT) == before


def test_defaults_keep_the_manifest():
    assert operator_deployment(DEPLOYMENT) == DEPLOYMENT
    assert operator_deployment(BINDER, container="binder") == BINDER


def test_the_binder_runs_the_operator_image_it_is_given():
    result = operator_deployment(BINDER, image="registry.example.com/op:2", container="binder")
    [container] = result["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/op:2" and container["command"] == ["kubenest-binder"]
    with pytest.raises(AnsibleFilterError, match="no container named operator"):
        operator_deployment(BINDER, image="registry.example.com/op:2")


@pytest.mark.parametrize(("args", "message"), [
    ({"volumes": [{"emptyDir": {}}]}, "needs a name"),
    ({"mounts": ["x"]}, "needs a name"),
])
def test_bad_additions_are_refused(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        operator_deployment(DEPLOYMENT, **args)


def test_only_the_operator_deployment_is_taken():
    with pytest.raises(AnsibleFilterError, match="expected the operator's Deployment"):
        operator_deployment({"kind": "Service"})
