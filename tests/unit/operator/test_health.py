"""The control plane's health against what the collection applied: managedFields read, findings built."""

from __future__ import annotations

import json

from kubenest_operator import health, owners


def _entry(manager: str, fields: dict, operation: str = "Update", subresource: str | None = None) -> dict:
    entry = {"manager": manager, "operation": operation, "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource is not None:
        entry["subresource"] = subresource
    return entry


APPLIED = _entry("kosmos.kubenest", {
    "f:metadata": {"f:labels": {"f:kosmos.io/virtualcluster": {}}},
    "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
        'k:{"name":"kube-apiserver"}': {".": {}, "f:image": {}, "f:args": {}, "f:name": {}}}}}},
}, operation="Apply")
CONTROLLER_STATUS = _entry("kube-controller-manager", {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}},
                           subresource="status")
CONTROLLER_REVISION = _entry("kube-controller-manager", {
    "f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}})


def _deployment(*entries: dict, replicas: int = 1, ready: int = 1) -> dict:
    return {"metadata": {"name": "a-apiserver", "managedFields": [APPLIED, *entries]},
            "spec": {"replicas": replicas}, "status": {"readyReplicas": ready}}


def test_what_controllers_and_rollout_restarts_write_is_not_drift():
    restart = _entry("kubectl-rollout", {"f:spec": {"f:template": {"f:metadata": {"f:annotations": {
        "f:kubectl.kubernetes.io/restartedAt": {}}}}}})
    labelled = _entry("kubectl-label", {"f:metadata": {"f:labels": {"f:team": {}}}})
    assert owners.changed_by_others(_deployment(CONTROLLER_STATUS, CONTROLLER_REVISION, restart, labelled)) == {}


def test_a_scale_an_edit_and_a_set_image_are_drift_named_by_field_and_manager():
    scaled = _entry("kubectl", {"f:spec": {"f:replicas": {}}}, subresource="scale")
    image = _entry("kubectl-set", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"kube-apiserver"}': {"f:image": {}}}}}}})
    changed = owners.changed_by_others(_deployment(scaled, image))
    assert changed == {"kubectl": ["spec.replicas"],
                       "kubectl-set": ["spec.template.spec.containers[name=kube-apiserver].image"]}
    assert owners.describe("Deployment", "a-apiserver", changed) == (
        "Deployment a-apiserver: spec.replicas changed by kubectl; "
        "spec.template.spec.containers[name=kube-apiserver].image changed by kubectl-set")


def test_the_operator_and_the_collection_are_never_others():
    own = _entry("kosmos.kubenest", {"f:spec": {"f:replicas": {}}})  # a merge patch of the collection's
    operator = _entry("kubenest-operator", {"f:spec": {"f:paused": {}}})
    assert owners.changed_by_others(_deployment(own, operator)) == {}


def test_a_long_list_of_fields_is_cut_in_the_message():
    many = _entry("kubectl-edit", {"f:spec": {f"f:f{i}": {} for i in range(5)}})
    changed = owners.changed_by_others({"metadata": {"managedFields": [many]}})
    assert owners.describe("Service", "s", changed) == (
        "Service s: spec.f0, spec.f1, spec.f2 and 2 more changed by kubectl-edit")


def _recorded(key: str, obj: dict | None = None, **extra) -> dict:
    kind, name = key.split("/", 1)
    entry = {"kind": kind, "name": name, **extra}
    if obj is not None:
        entry["fields"] = owners.fields_digest(obj)
    return entry


def _image_set_by_kubectl() -> dict:
    """What `kubectl set image` leaves: the image field moved from the collection's entry to kubectl-set's."""
    obj = _deployment(_entry("kubectl-set", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"kube-apiserver"}': {"f:image": {}}}}}}}))
    ours = json.loads(json.dumps(APPLIED))
    del ours["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"kube-apiserver"}']["f:image"]
    obj["metadata"]["managedFields"][0] = ours
    return obj


def test_findings_say_what_is_missing_changed_or_not_ready_and_which_a_run_repairs():
    objects = {
        "Deployment/a-apiserver": _image_set_by_kubectl(),
        "Deployment/a-scheduler": _deployment(replicas=1, ready=0),
        "Deployment/a-controller-manager": _deployment(),
        "Secret/a-admin-kubeconfig": {"metadata": {"managedFields": [
            _entry("kubectl-edit", {"f:data": {"f:kubeconfig": {}}})]}},
    }
    expected = [_recorded("Deployment/a-apiserver", _deployment(), replicas=1),
                _recorded("Deployment/a-controller-manager", _deployment(), replicas=1),
                _recorded("Deployment/a-scheduler", _deployment(), replicas=1),
                _recorded("NetworkPolicy/a-etcd"), _recorded("Secret/a-admin-kubeconfig"),
                _recorded("Secret/a-pki"), _recorded("StatefulSet/a-etcd"), _recorded("Lease/a-newer-kind")]
    findings = health.assess_objects(objects, expected)
    assert [(f.text, f.repair) for f in findings] == [
        ("Deployment a-apiserver: spec.template.spec.containers[name=kube-apiserver].image changed by kubectl-set",
         True),
        ("Deployment a-scheduler has 0 of 1 replicas ready", False),
        ("NetworkPolicy a-etcd is missing", True),
        ("Secret a-pki is missing: its certificate authorities come back only with a backup restored into a new "
         "virtual cluster (playbooks/etcd_restore.yml), not by a run", False),
        ("StatefulSet a-etcd is missing", True),
    ]  # a Secret's content is the pki role's to keep: not compared; a kind it does not know, not judged


def test_a_scale_that_names_no_manager_is_found_by_the_replicas_and_the_fields_the_collection_lost():
    applied = _deployment()
    scaled = _deployment(replicas=0, ready=0)  # the scale subresource took spec.replicas and recorded no one
    scaled["metadata"]["managedFields"] = [_entry("kosmos.kubenest", {"f:spec": {"f:template": {}}},
                                                  operation="Apply")]
    record = _recorded("Deployment/a-apiserver", applied, replicas=1)
    assert [(f.text, f.repair) for f in health.assess_objects({"Deployment/a-apiserver": scaled}, [record])] == [
        ("Deployment a-apiserver: spec.replicas is 0 where the collection set 1", True)]
    del record["replicas"]
    assert [(f.text, f.repair) for f in health.assess_objects({"Deployment/a-apiserver": scaled}, [record])] == [
        ("Deployment a-apiserver: a field the collection set was changed by another writer", True)]


def test_what_others_held_when_the_run_ended_is_not_drift():
    """A field another manager held already when the last run was recorded (a tool of the site's, or one of
    the collection's own under another name) is not taken for drift: only what the collection lost since is."""
    obj = _deployment(_entry("site-tool", {"f:spec": {"f:template": {"f:spec": {"f:containers": {
        'k:{"name":"kube-apiserver"}': {"f:env": {}}}}}}}))
    record = _recorded("Deployment/a-apiserver", obj, replicas=1)
    assert health.assess_objects({"Deployment/a-apiserver": obj}, [record]) == []
    assert health.assess_objects({"Deployment/a-apiserver": _image_set_by_kubectl()}, [record]) == [
        health.Finding("Deployment a-apiserver: spec.template.spec.containers[name=kube-apiserver].image changed "
                       "by kubectl-set", True)]


def test_objects_the_last_run_did_not_leave_are_not_judged():
    scaled = _entry("kubectl", {"f:spec": {"f:replicas": {}}}, subresource="scale")
    assert health.assess_objects({"Deployment/extra": _deployment(scaled, ready=0)}, []) == []


def test_the_inventory_holds_what_the_collection_wrote_with_its_fields_and_replicas():
    objects = {"Deployment/a-apiserver": _deployment(replicas=2),
               "Secret/someone-elses": {"metadata": {"managedFields": [_entry("kubectl-create", {"f:data": {}})]}}}
    assert health.inventory(objects) == [{"kind": "Deployment", "name": "a-apiserver",
                                          "fields": owners.fields_digest(_deployment()), "replicas": 2}]
    assert owners.collection_fields(_deployment()) == [
        "spec.replicas", "spec.template.spec.containers[name=kube-apiserver].args",
        "spec.template.spec.containers[name=kube-apiserver].image",
        "spec.template.spec.containers[name=kube-apiserver].name"]


def test_without_a_record_the_workloads_are_expected():
    assert [(e["kind"], e["name"]) for e in health.workloads("a")] == [
        ("StatefulSet", "a-etcd"), ("Deployment", "a-apiserver"), ("Deployment", "a-controller-manager"),
        ("Deployment", "a-scheduler")]
