"""kosmos.kubenest.kube_apply and kube_info, the controller-side API actions, on a real API server: server-side
apply and what counts as a change, check mode, deletion by name and by label, waiting for a condition, a
token-authenticated kubeconfig, and errors that say what went wrong without echoing what was sent."""

from __future__ import annotations

import base64
import json

import kubernetes
import pytest
import yaml

from tests.support.playbook import run_module
from tests.support.virtualclusters import ensure_namespace

NS = "kube-actions"


@pytest.fixture(scope="module")
def core(api_client):
    ensure_namespace(api_client, NS)
    return kubernetes.client.CoreV1Api(api_client)


def act(module, kubeconfig, **args):
    """(rc, result) of one run of `module`."""
    rc, result, _out = run_module(module, kubeconfig, **args)
    return rc, result


def config_map(name, data, labels=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}},
            "data": data}


def test_apply_creates_then_changes_only_when_the_object_changes(apiserver, core):
    cm = config_map("first", {"a": "1"}, {"keep": "yes", "drop": "later"})
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS, definition=cm)
    assert rc == 0 and result["changed"] and result["result"]["data"] == {"a": "1"}, result
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS, definition=cm)
    assert rc == 0 and not result["changed"], result
    # A field this manager set before and not now is removed, as server-side apply promises.
    cm2 = config_map("first", {"a": "2"}, {"keep": "yes"})
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS, definition=cm2)
    assert rc == 0 and result["changed"], result
    stored = core.read_namespaced_config_map("first", NS)
    assert stored.data == {"a": "2"} and stored.metadata.labels == {"keep": "yes"}
    assert {m.manager for m in stored.metadata.managed_fields} == {"kosmos.kubenest"}


def test_several_objects_in_order_with_server_fields_in_the_answer(apiserver, core):
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
               "spec": {"selector": {"app": "x"}, "ports": [{"name": "a", "port": 53, "protocol": "UDP"},
                                                            {"name": "b", "port": 53, "protocol": "TCP"}]}}
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS,
                     definition=[config_map("second", {"b": "1"}), service])
    assert rc == 0 and result["changed"] and "result" not in result, result
    assert [o["kind"] for o in result["objects"]] == ["ConfigMap", "Service"]
    assert result["objects"][1]["spec"]["clusterIP"]  # assigned by the server
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS,
                     definition=[config_map("second", {"b": "1"}), service])
    assert rc == 0 and not result["changed"], result
    assert len(core.read_namespaced_service("svc", NS).spec.ports) == 2


def test_waves_put_namespaces_first_and_workloads_last_whatever_the_order_given(apiserver, core):
    ns = "kube-actions-waves"
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "kubenest.local/none:1"}]}}}}
    maps = [dict(config_map(f"map-{n}", {"n": str(n)}), metadata={"name": f"map-{n}", "namespace": ns})
            for n in range(9)]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    # In the order given, the Deployment and the maps would go to a namespace that does not exist yet.
    definition = [deployment] + maps + [namespace]
    rc, result = act("kube_apply", apiserver.kubeconfig, definition=definition)
    assert rc == 0 and result["changed"], result
    assert [o["kind"] for o in result["objects"]] == ["Deployment"] + ["ConfigMap"] * 9 + ["Namespace"]
    assert [o["metadata"]["name"] for o in result["objects"][1:10]] == [f"map-{n}" for n in range(9)]
    created = {o["kind"]: o["metadata"]["creationTimestamp"] for o in result["objects"]}
    assert created["Namespace"] <= created["ConfigMap"] <= created["Deployment"]
    stored = apps_v1(core).read_namespaced_deployment("web", ns)
    maps_stored = core.list_namespaced_config_map(ns, label_selector="").items
    assert stored.metadata.resource_version and len([m for m in maps_stored if m.metadata.name.startswith("map-")]) == 9
    rc, result = act("kube_apply", apiserver.kubeconfig, definition=definition)
    assert rc == 0 and not result["changed"], result
    # A failure in a wave stops the later ones: nothing of the last wave is written.
    bad = dict(config_map("bad", {"x": "1"}), metadata={"name": "Not_A_Name", "namespace": ns})
    late = dict(deployment, metadata={"name": "late", "namespace": ns})
    rc, result = act("kube_apply", apiserver.kubeconfig, definition=[late, bad])
    assert rc != 0 and "Not_A_Name" in result["msg"], result
    assert not apps_v1(core).list_namespaced_deployment(ns, field_selector="metadata.name=late").items


def apps_v1(core):
    return kubernetes.client.AppsV1Api(core.api_client)


def test_check_mode_reports_the_change_and_writes_nothing(apiserver, core):
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, namespace=NS,
                     definition=config_map("dry", {"x": "1"}))
    assert rc == 0 and result["changed"] and result["result"]["data"] == {"x": "1"}, result
    assert not core.list_namespaced_config_map(NS, field_selector="metadata.name=dry").items
    act("kube_apply", apiserver.kubeconfig, namespace=NS, definition=config_map("dry", {"x": "1"}))
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, namespace=NS,
                     definition=config_map("dry", {"x": "2"}))
    assert rc == 0 and result["changed"], result
    assert core.read_namespaced_config_map("dry", NS).data == {"x": "1"}
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, namespace=NS,
                     definition=config_map("dry", {"x": "1"}))
    assert rc == 0 and not result["changed"], result


def test_delete_by_name_and_by_label_then_nothing_to_do(apiserver, core):
    for name, team in (("del-a", "x"), ("del-b", "x"), ("del-c", "y")):
        core.create_namespaced_config_map(NS, {"metadata": {"name": name, "labels": {"team": team}}})
    rc, result = act("kube_apply", apiserver.kubeconfig, state="absent", kind="ConfigMap", name="del-c",
                     namespace=NS, wait=True)
    assert rc == 0 and result["changed"], result
    rc, result = act("kube_apply", apiserver.kubeconfig, state="absent", kind="ConfigMap", name="del-c",
                     namespace=NS)
    assert rc == 0 and not result["changed"], result
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, state="absent", kind="ConfigMap",
                     namespace=NS, label_selectors=["team=x"])
    assert rc == 0 and result["changed"], result
    assert len(core.list_namespaced_config_map(NS, label_selector="team=x").items) == 2
    rc, result = act("kube_apply", apiserver.kubeconfig, state="absent", kind="ConfigMap",
                     namespace=NS, label_selectors=["team=x"])
    assert rc == 0 and result["changed"], result
    assert not core.list_namespaced_config_map(NS, label_selector="team=x").items


def test_info_reads_one_lists_by_label_and_misses_quietly(apiserver, core):
    core.create_namespaced_config_map(NS, {"metadata": {"name": "info-a", "labels": {"info": "yes"}}})
    rc, result = act("kube_info", apiserver.kubeconfig, kind="ConfigMap", namespace=NS, name="info-a")
    assert rc == 0 and [r["metadata"]["name"] for r in result["resources"]] == ["info-a"], result
    rc, result = act("kube_info", apiserver.kubeconfig, kind="ConfigMap", namespace=NS,
                     label_selectors=["info=yes"])
    assert rc == 0 and [(r["kind"], r["apiVersion"]) for r in result["resources"]] == [("ConfigMap", "v1")]
    rc, result = act("kube_info", apiserver.kubeconfig, kind="ConfigMap", namespace=NS, name="none")
    assert rc == 0 and result["resources"] == [], result


def test_wait_for_a_condition_succeeds_or_names_what_is_missing(apiserver):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.kube-actions.example"},
           "spec": {"group": "kube-actions.example", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    rc, result = act("kube_apply", apiserver.kubeconfig, definition=crd)
    assert rc == 0, result
    rc, result = act("kube_info", apiserver.kubeconfig, api_version="apiextensions.k8s.io/v1",
                     kind="CustomResourceDefinition", name="gadgets.kube-actions.example", wait=True,
                     wait_condition={"type": "Established"}, wait_timeout=60, wait_sleep=0.2)
    assert rc == 0 and len(result["resources"]) == 1, result
    rc, result = act("kube_info", apiserver.kubeconfig, api_version="apiextensions.k8s.io/v1",
                     kind="CustomResourceDefinition", name="gadgets.kube-actions.example", wait=True,
                     wait_condition={"type": "Established", "status": "False"}, wait_timeout=1)
    assert rc != 0 and result["msg"] == ("CustomResourceDefinition gadgets.kube-actions.example did not reach "
                                         "Established=False within 1.0s: gadgets.kube-actions.example is "
                                         "Established=True (InitialNamesAccepted)"), result
    rc, result = act("kube_info", apiserver.kubeconfig, kind="ConfigMap", namespace=NS, name="never",
                     wait=True, wait_timeout=1)
    assert rc != 0 and result["msg"] == "ConfigMap never did not appear within 1.0s", result


def test_errors_are_specific_and_never_echo_the_request(apiserver, tmp_path):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad", "namespace": NS},
              "stringData": {"bad key!": "secret-value-42"}}
    rc, result, out = run_module("kube_apply", apiserver.kubeconfig, definition=secret)
    assert rc != 0 and "HTTP 422" in result["msg"] and "bad key!" in result["msg"], result
    assert "secret-value-42" not in out
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS,
                     definition={"apiVersion": "example.com/v9", "kind": "Gadget", "metadata": {"name": "g"}})
    assert rc != 0 and result["msg"] == "the API server serves no example.com/v9", result
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS,
                     definition={"apiVersion": "v1", "kind": "Gadget", "metadata": {"name": "g"}})
    assert rc != 0 and result["msg"] == ("the API server serves no kind Gadget in v1 "
                                         "(api_version names the group too, e.g. apps/v1)"), result
    rc, result = act("kube_apply", apiserver.kubeconfig, definition={"kind": "ConfigMap"})
    assert rc != 0 and result["msg"] == "definition 0 needs apiVersion, kind and metadata.name", result
    rc, result = act("kube_apply", tmp_path / "missing.kubeconfig", definition=config_map("x", {}))
    assert rc != 0 and "cannot read the kubeconfig" in result["msg"] and "No such file" in result["msg"], result
    exec_config = yaml.safe_load(apiserver.kubeconfig.read_text())
    exec_config["users"][0]["user"] = {"exec": {"command": "touch", "args": [str(tmp_path / "ran")],
                                                "apiVersion": "client.authentication.k8s.io/v1"}}
    (tmp_path / "exec.kubeconfig").write_text(yaml.safe_dump(exec_config))
    rc, result = act("kube_info", tmp_path / "exec.kubeconfig", kind="Namespace")
    # A v1 exec section must say whether the plugin may ask questions: refused before the plugin runs.
    assert rc != 0 and "has interactiveMode None; one of Never, IfAvailable, Always is required" in result["msg"]
    assert not (tmp_path / "ran").exists()


def test_a_token_kubeconfig_is_used_and_a_refusal_is_reported(apiserver, core, tmp_path):
    core.create_namespaced_service_account(NS, {"metadata": {"name": "reader"}})
    token = core.create_namespaced_service_account_token(
        "reader", NS, {"spec": {"expirationSeconds": 600}}).status.token
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "token.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    rc, result, out = run_module("kube_info", path, kind="Secret", namespace=NS)
    assert rc != 0 and "HTTP 403" in result["msg"] and "system:serviceaccount:kube-actions:reader" in result["msg"]
    assert token not in out
    # The same kubeconfig with the CA in a file next to it, as kubectl resolves relative paths.
    cluster = config["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(cluster.pop("certificate-authority-data")))
    cluster["certificate-authority"] = "ca.crt"
    path.write_text(json.dumps(config))
    rc, result = act("kube_info", path, kind="Secret", namespace=NS)
    assert rc != 0 and "HTTP 403" in result["msg"], result


def test_patched_merges_removes_with_null_and_skips_a_missing_object(apiserver, core):
    core.create_namespaced_config_map(NS, {"metadata": {"name": "patch-me", "labels": {"a": "1", "b": "2"}},
                                           "data": {"k": "v"}})
    args = dict(state="patched", kind="ConfigMap", namespace=NS, name="patch-me")
    rc, result = act("kube_apply", apiserver.kubeconfig, **args,
                     definition={"metadata": {"labels": {"b": None, "c": "3"}}})
    assert rc == 0 and result["changed"] and result["result"]["metadata"]["labels"] == {"a": "1", "c": "3"}
    rc, result = act("kube_apply", apiserver.kubeconfig, **args,
                     definition={"metadata": {"labels": {"c": "3"}}})
    assert rc == 0 and not result["changed"], result
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, **args,
                     definition={"data": {"k": "w"}})
    assert rc == 0 and result["changed"] and core.read_namespaced_config_map("patch-me", NS).data == {"k": "v"}
    missing = {**args, "name": "nothing-here", "definition": {"data": {"k": "w"}}}
    rc, result = act("kube_apply", apiserver.kubeconfig, **missing)
    assert rc == 0 and not result["changed"] and result["result"] == {}, result
    rc, result = act("kube_apply", apiserver.kubeconfig, state="patched", kind="ConfigMap",
                     namespace=NS, definition={"data": {}})
    assert rc != 0 and result["msg"] == "state=patched needs kind, name and a definition that is one mapping"


def test_a_json_patch_applies_whole_or_not_at_all_by_its_test_operations(apiserver, core):
    core.create_namespaced_config_map(NS, {"metadata": {"name": "json-patch-me"}, "data": {"owner": "u-1", "k": "v"}})
    args = dict(state="patched", patch_type="json", kind="ConfigMap", namespace=NS, name="json-patch-me")
    guarded = [{"op": "test", "path": "/data/owner", "value": "u-1"}, {"op": "remove", "path": "/data/k"}]
    rc, result = act("kube_apply", apiserver.kubeconfig, check=True, **args, definition=guarded)
    assert rc == 0 and result["changed"] and core.read_namespaced_config_map("json-patch-me", NS).data["k"] == "v"
    rc, result = act("kube_apply", apiserver.kubeconfig, **args, definition=guarded)
    assert rc == 0 and result["changed"] and result["result"]["data"] == {"owner": "u-1"}, result
    # Its test fails now (another owner): nothing is changed, and the task says so.
    core.patch_namespaced_config_map("json-patch-me", NS, {"data": {"owner": "u-2", "k": "again"}})
    rc, result = act("kube_apply", apiserver.kubeconfig, **args, definition=guarded)
    assert rc != 0 and "HTTP 422" in result["msg"], result
    assert core.read_namespaced_config_map("json-patch-me", NS).data == {"owner": "u-2", "k": "again"}
    rc, result = act("kube_apply", apiserver.kubeconfig, **args, definition={"data": {}})
    assert rc != 0 and result["msg"] == ("state=patched with patch_type=json needs kind, name and a definition that "
                                         "is a list of operations"), result


def test_a_list_stands_for_its_items(apiserver, core):
    items = [config_map("listed-1", {"a": "1"}), config_map("listed-2", {"b": "2"})]
    listed = {"apiVersion": "v1", "kind": "List", "items": items}
    rc, result = act("kube_apply", apiserver.kubeconfig, namespace=NS, definition=listed)
    assert rc == 0 and result["changed"], result
    assert [o["metadata"]["name"] for o in result["objects"]] == ["listed-1", "listed-2"]
    assert core.read_namespaced_config_map("listed-2", NS).data == {"b": "2"}
