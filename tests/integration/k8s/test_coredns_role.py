"""The coredns role against a real API server: the objects land as built, a second run changes nothing, and a
cluster with no nodes gets its DNS without waiting for it (a virtual cluster before its nodes join)."""

from __future__ import annotations

import json
import sys
import threading

import kubernetes

from tests.support.playbook import run_playbook, write_play


def _play(tmp_path, apiserver, **role_vars):
    tasks = [
        {"name": "DNS", "ansible.builtin.include_role": {"name": "kosmos.kubenest.coredns"},
         "vars": {"coredns_kubeconfig": str(apiserver.kubeconfig), "coredns_service_cidr": apiserver.service_cidr,
                  "coredns_upstream": [], **role_vars}},
        {"name": "Show", "ansible.builtin.debug": {"msg": {"address": "{{ coredns_address }}",
                                                           "ready": "{{ coredns_ready }}"}}},
    ]
    playbook = write_play(tmp_path / "dns.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    return playbook, inventory


READ_NODES = "kosmos.kubenest.coredns : Nodes the DNS can run on"


def _changed(result) -> bool:
    return result.host_stats("localhost")["changed"] > 0


def test_role_applies_cluster_dns_and_is_idempotent(tmp_path, apiserver, api_client):
    playbook, inventory = _play(tmp_path, apiserver, coredns_labels={"team": "dns"})
    first = run_playbook(playbook, inventory, tmp_path / "cp")
    assert first.rc == 0, first.stderr
    assert not first.task(READ_NODES, "localhost").get("skipped")  # no node list handed over: the role reads them
    shown = first.task("Show", "localhost")["msg"]
    core = kubernetes.client.CoreV1Api(api_client)
    service = core.read_namespaced_service("kube-dns", "kube-system")
    assert shown["address"] == service.spec.cluster_ip and service.spec.cluster_ip.endswith(".10")
    assert shown["ready"] is False  # no nodes: nothing to wait for
    deployment = kubernetes.client.AppsV1Api(api_client).read_namespaced_deployment("coredns", "kube-system")
    assert deployment.spec.replicas == 1 and deployment.metadata.labels["team"] == "dns"
    corefile = core.read_namespaced_config_map("coredns", "kube-system").data["Corefile"]
    assert "rcode NXDOMAIN" in corefile
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    assert rbac.read_cluster_role_binding("system:coredns").subjects[0].name == "coredns"

    second = run_playbook(playbook, inventory, tmp_path / "cp")
    assert second.rc == 0 and not _changed(second), second.data["stats"]
    # a client-side merge keys ports by number and lost DNS over UDP on the second run
    ports = core.read_namespaced_service("kube-dns", "kube-system").spec.ports
    assert sorted((p.port, p.protocol) for p in ports) == [(53, "TCP"), (53, "UDP"), (9153, "TCP")]


def test_bad_settings_fail_before_anything_changes(tmp_path, apiserver, api_client):
    playbook, inventory = _play(tmp_path, apiserver, coredns_cluster_domain="evil.local }\n. { whoami",
                                coredns_labels={"run": "refused"})
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    assert result.rc != 0
    assert "[kubenest:permanent:InvalidRequest] cluster DNS: cluster domain" in json.dumps(result.data)
    core = kubernetes.client.CoreV1Api(api_client)
    assert not core.list_namespaced_config_map("kube-system", label_selector="run=refused").items


def test_a_deployment_available_without_a_ready_pod_is_not_a_dns_that_answers(tmp_path, apiserver, api_client):
    """With one replica and maxUnavailable 1 the Deployment controller reports Available with no pod ready; the
    role waits for a ready replica instead. Here the test writes that status, as the controller would."""
    core, apps = kubernetes.client.CoreV1Api(api_client), kubernetes.client.AppsV1Api(api_client)
    node = core.create_node({"metadata": {"name": "dns-node-without-kubelet"}})
    stop = threading.Event()

    def controller_says_available():
        while not stop.is_set():
            try:
                current = apps.read_namespaced_deployment("coredns", "kube-system")
                apps.patch_namespaced_deployment_status("coredns", "kube-system", {"status": {
                    "observedGeneration": current.metadata.generation, "replicas": 1, "updatedReplicas": 1,
                    "unavailableReplicas": 1,
                    "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}})
            except kubernetes.client.ApiException:
                pass
            stop.wait(0.3)

    writer = threading.Thread(target=controller_says_available, daemon=True)
    writer.start()
    try:
        playbook, inventory = _play(tmp_path, apiserver, coredns_wait_timeout=3)
        result = run_playbook(playbook, inventory, tmp_path / "cp")
    finally:
        stop.set()
        writer.join(5)
        core.delete_node(node.metadata.name)
    assert result.rc != 0
    expected = "Deployment kube-system/coredns is not rolled out after 3 s: 0 of 1 replicas ready"
    assert expected in json.dumps(result.data)


def test_nodes_the_caller_has_just_read_size_the_dns_without_a_read_of_its_own(tmp_path, apiserver, api_client):
    # None of these is in the cluster: the replicas can only come from the list handed over.
    nodes = [{"metadata": {"name": "n1"}, "spec": {}}, {"metadata": {"name": "n2"}, "spec": {}},
             {"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}}]
    playbook, inventory = _play(tmp_path, apiserver, coredns_node_list=nodes, coredns_wait=False)
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    assert result.rc == 0, result.stderr
    assert result.task(READ_NODES, "localhost").get("skipped") is True
    deployment = kubernetes.client.AppsV1Api(api_client).read_namespaced_deployment("coredns", "kube-system")
    assert deployment.spec.replicas == 2


def test_a_second_include_in_the_same_run_applies_only_what_changed(tmp_path, apiserver, api_client):
    """Ahead of the nodes, again once they joined: the same objects are not applied twice in one run."""
    apply_task = "kosmos.kubenest.coredns : CoreDNS"
    one = [{"metadata": {"name": "n1"}, "spec": {}}]
    two = [*one, {"metadata": {"name": "n2"}, "spec": {}}]
    common = {"coredns_kubeconfig": str(apiserver.kubeconfig), "coredns_service_cidr": apiserver.service_cidr,
              "coredns_upstream": [], "coredns_wait": False}
    tasks = [{"name": f"DNS {i}", "ansible.builtin.include_role": {"name": "kosmos.kubenest.coredns"},
              "vars": {**common, "coredns_node_list": nodes}} for i, nodes in enumerate((one, one, two))]
    playbook = write_play(tmp_path / "dns.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    assert result.rc == 0, result.stderr
    applies = [task["hosts"]["localhost"] for play in result.data["plays"] for task in play["tasks"]
               if task["task"]["name"] == apply_task]
    assert [bool(a.get("skipped")) for a in applies] == [False, True, False]
    deployment = kubernetes.client.AppsV1Api(api_client).read_namespaced_deployment("coredns", "kube-system")
    assert deployment.spec.replicas == 2


def test_objects_handed_over_and_applied_by_the_caller_are_not_applied_again(tmp_path, apiserver, api_client):
    """The objects entry point reads the nodes and hands the DNS over as data; the caller applies it with its own
    objects in one call, and the main entry point's later include only waits, unless the nodes changed."""
    apply_task = "kosmos.kubenest.coredns : CoreDNS"
    common = {"coredns_kubeconfig": str(apiserver.kubeconfig), "coredns_service_cidr": apiserver.service_cidr,
              "coredns_upstream": [], "coredns_wait": False}
    two = [{"metadata": {"name": f"n{i}"}, "spec": {}} for i in (1, 2)]
    marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "caller-object", "namespace": "default"}}
    tasks = [
        {"name": "Hand over", "vars": common,
         "ansible.builtin.include_role": {"name": "kosmos.kubenest.coredns", "tasks_from": "objects.yml"}},
        {"name": "Caller's apply", "kosmos.kubenest.kube_apply": {
            "kubeconfig": str(apiserver.kubeconfig), "definition": "{{ [caller_object] + coredns_objects }}"},
         "vars": {"caller_object": marker}},
        {"name": "Same nodes", "ansible.builtin.include_role": {"name": "kosmos.kubenest.coredns"},
         "vars": {**common, "coredns_node_list": []}},
        {"name": "Two nodes", "ansible.builtin.include_role": {"name": "kosmos.kubenest.coredns"},
         "vars": {**common, "coredns_node_list": two}},
    ]
    playbook = write_play(tmp_path / "dns.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    assert result.rc == 0, result.stderr

    def skipped(name):
        return [bool(task["hosts"]["localhost"].get("skipped")) for play in result.data["plays"]
                for task in play["tasks"] if task["task"]["name"] == name]

    assert skipped(READ_NODES) == [False, True, True]  # read by the hand-over only: the includes were given lists
    assert skipped(apply_task) == [True, False]
    core, apps = kubernetes.client.CoreV1Api(api_client), kubernetes.client.AppsV1Api(api_client)
    assert core.read_namespaced_config_map("caller-object", "default").metadata.name == "caller-object"
    assert core.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip
    assert apps.read_namespaced_deployment("coredns", "kube-system").spec.replicas == 2
