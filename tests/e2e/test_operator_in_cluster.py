"""The operator deployed into the host cluster from its image (`python -m sandbox.operator deploy`, what `make up`
does): two replicas on the control-plane node, one working; a VirtualCluster that asks for a node reaches Ready
although the working replica is deleted in the middle of its run, and its deletion gives the node back."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import client as k8s

from sandbox.operator_in_cluster import NAME, NAMESPACE
from tests.e2e.conftest import run_python
from tests.support import rotation
from tests.support.nodes import assert_back_in_host_clean, globalnode
from tests.support.virtualclusters import (
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    sandbox_operator_paused,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-in-cluster"
SELECTOR = f"app.kubernetes.io/name={NAME}"


@pytest.fixture(scope="module")
def in_cluster(host_cluster):
    sb, api = host_cluster
    with sandbox_operator_paused():  # a developer's local operator, if any, waits meanwhile
        started = time.monotonic()
        run_python("-m", "sandbox.operator", "deploy", timeout=1800)
        print(f"\noperator deployed in the host cluster in {time.monotonic() - started:.0f}s")
        ensure_namespace(api, NS)
        try:
            yield sb, api
        finally:
            for vc in k8s.CustomObjectsApi(api).list_namespaced_custom_object(
                    "kosmos.io", "v1alpha1", NS, "virtualclusters")["items"]:
                delete_vc(api, NS, vc["metadata"]["name"], timeout=600)
            run_python("-m", "sandbox.operator", "stop")  # the other modules run operators of their own


def _operator_may(api, verb: str, resource: str, namespace: str) -> bool:
    review = k8s.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{NAMESPACE}:{NAME}", "groups": ["system:serviceaccounts"],
                 "resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}})
    return review.status.allowed


def _pods(api) -> list:
    return k8s.CoreV1Api(api).list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items


def _active_peer(api) -> str | None:
    """The peer that works: the highest priority among the live ones in the ClusterKopfPeering."""
    peering = k8s.CustomObjectsApi(api).get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", "kubenest")
    peers = {pid: info for pid, info in (peering.get("status") or {}).items() if isinstance(info, dict)}
    return max(peers, key=lambda pid: peers[pid].get("priority", 0)) if peers else None


def test_two_replicas_run_non_root_on_the_control_plane_node(in_cluster):
    sb, api = in_cluster

    def two_ready():  # the standby is ready to take over as well
        ready = [p for p in _pods(api) if p.status.phase == "Running"
                 and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return ready if len(ready) == 2 else None
    pods = wait_for(two_ready, 300, "two operator pods running and ready")
    control_planes = {n.name for n in sb.nodes if n.role == "control_plane"}
    for pod in pods:
        assert pod.spec.node_name in control_planes
        assert pod.spec.containers[0].image == "kubenest.local/kubenest-operator:1.0.0"
        assert pod.spec.security_context.run_as_non_root
        assert pod.spec.containers[0].security_context.read_only_root_filesystem
    pdb = k8s.PolicyV1Api(api).read_namespaced_pod_disruption_budget(NAME, NAMESPACE)
    assert pdb.spec.min_available == 1 and pdb.status.current_healthy == 2
    assert _active_peer(api) in {p.metadata.name for p in pods}
    # Its tenant rights come from kubenest-binder, namespace by namespace: none where no VirtualCluster is.
    binder = k8s.AppsV1Api(api).read_namespaced_deployment("kubenest-binder", NAMESPACE)
    assert binder.status.ready_replicas == 1, binder.status
    assert binder.spec.template.spec.service_account_name == "kubenest-binder"
    assert not k8s.RbacAuthorizationV1Api(api).list_cluster_role_binding(
        field_selector="metadata.name=kubenest-operator-tenant").items
    assert not _operator_may(api, "create", "secrets", NS)
    assert not _operator_may(api, "get", "secrets", "kube-system")


@rotation.turn("operator-replica-deleted-mid-run")
def test_a_virtual_cluster_is_made_with_its_node_although_the_working_replica_is_deleted_mid_run(in_cluster):
    sb, api = in_cluster
    cp = next(n for n in sb.nodes if n.role == "control_plane")
    started = time.monotonic()
    create_vc(api, NS, "moved", {"externalIP": cp.ip, "promotePolicies": [
        {"labelSelector": {"matchLabels": {"kubernetes.io/hostname": "kn-w2"}}, "nodeCount": 1}]})

    def running():
        vc = get_vc(api, NS, "moved")
        progress = ((vc or {}).get("status") or {}).get("progress") or {}
        return vc if progress.get("tasksDone", 0) >= 5 else None
    first_run = wait_for(running, 300, "the first run of 'moved' under way", interval=0.5)["status"]["progress"]
    first_run = first_run["runID"]
    active = _active_peer(api)
    assert active in {p.metadata.name for p in _pods(api)}
    deleted_at = time.monotonic()
    k8s.CoreV1Api(api).delete_namespaced_pod(active, NAMESPACE)
    wait_for(lambda: _active_peer(api) not in (None, active), 180, "another replica to take over")
    took_over = time.monotonic() - deleted_at

    def resumed():
        run = (((get_vc(api, NS, "moved") or {}).get("status") or {}).get("progress") or {}).get("runID")
        return run if run and run != first_run else None
    wait_for(resumed, 300, "a new run of 'moved' by the other replica", interval=0.5)
    print(f"\nfailover: the other replica leads {took_over:.1f}s and has started a new run "
          f"{time.monotonic() - deleted_at:.1f}s after the working one was deleted")

    vc = wait_ready(api, NS, "moved", timeout=900)
    print(f"'moved' Ready with its node {time.monotonic() - started:.0f}s after it was created")
    assert vc["status"]["nodesReady"] == "1/1" and condition(vc, "NodesReady")["status"] == "True"
    tenant, _cfg = tenant_client(vc, api)
    nodes = k8s.CoreV1Api(tenant).list_node().items
    assert [n.metadata.name for n in nodes] == ["kn-w2"]
    assert globalnode(api, "kn-w2")["status"]["virtualCluster"] == f"{NS}/moved"
    assert _operator_may(api, "create", "secrets", NS)  # bound by kubenest-binder for the VirtualCluster
    assert len([p for p in _pods(api) if p.status.phase == "Running"]) >= 1

    seconds = delete_vc(api, NS, "moved", timeout=600)
    print(f"'moved' deleted in {seconds:.0f}s")
    wait_for(lambda: globalnode(api, "kn-w2")["status"].get("state") == "free", 300, "kn-w2 free")
    assert_back_in_host_clean(sb, api, "kn-w2")
    wait_for(lambda: not _operator_may(api, "create", "secrets", NS), 60,
             "the operator's rights in the namespace to go with its last VirtualCluster")


# Components whose pod template changed since the last release, so that an upgrade from it rolls them: the
# controller-manager signs with ca.signer.crt (the cluster CA alone) since the CA's file became a trust bundle.
ROLLED_SINCE_RELEASE = ("controller-manager",)


def _tenant_pods(api, names) -> dict[str, tuple[str, int]]:
    """The control-plane pods of the virtual clusters `names`: name -> (uid, restarts)."""
    pods = {}
    for name in names:
        for pod in k8s.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={name}").items:
            restarts = sum(c.restart_count for c in pod.status.container_statuses or [])
            pods[pod.metadata.name] = (pod.metadata.uid, restarts)
    return pods


def _run_ids(api, names) -> dict[str, str]:
    return {name: get_vc(api, NS, name)["status"]["progress"]["runID"] for name in names}


def _upgrade(sb, api, image_and_archive) -> float:
    """Install the operator of another image over the running one; wait until only pods of it run."""
    from sandbox import operator_in_cluster

    started = time.monotonic()
    assert operator_in_cluster.deploy(sb, image_and_archive) == 0
    image = image_and_archive[0]

    def rolled():
        pods = _pods(api)
        return pods and all(p.spec.containers[0].image == image and p.status.phase == "Running"
                            and p.metadata.deletion_timestamp is None for p in pods)
    wait_for(rolled, 300, f"only operator pods of {image}", interval=1)
    return time.monotonic() - started


def _logged(api, phrase: str, names) -> bool:
    """Whether the operator's pods have logged `phrase` for each of the virtual clusters `names`."""
    text = "".join(k8s.CoreV1Api(api).read_namespaced_pod_log(p.metadata.name, NAMESPACE) for p in _pods(api))
    lines = [line for line in text.splitlines() if phrase in line]
    return all(any(f"{NS}/{name}]" in line for line in lines) for name in names)


class RunWatch:
    """Looks at the virtual clusters `names` every 0.3 s from its start until stopped, in a thread of its own, so
    nothing an upgrade starts goes unseen: the runs each one had (new run IDs) and any look at which two were
    updating at once."""

    def __init__(self, api, names, runs: dict[str, str]):
        self.api, self.names, self.runs = api, names, runs
        self.new: dict[str, set[str]] = {name: set() for name in names}
        self.together: list[list[str]] = []
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                vcs = {name: get_vc(self.api, NS, name) for name in self.names}
            except Exception:  # the host's API a moment away: look again
                self._stop.wait(0.3)
                continue
            self.looks += 1
            updating = [name for name, vc in vcs.items() if vc["status"].get("phase") == "Updating"]
            if len(updating) > 1:
                self.together.append(updating)
            for name, vc in vcs.items():
                run = (vc["status"].get("progress") or {}).get("runID")
                if run and run != self.runs[name]:
                    self.new[name].add(run)
            self._stop.wait(0.3)

    def all_ran(self) -> bool:
        return all(self.new[name] and condition(vc := get_vc(self.api, NS, name), "Ready")["status"] == "True"
                   and vc["status"].get("phase") == "Completed" for name in self.names)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@rotation.turn("operator-upgrade")
def test_an_upgrade_that_changes_no_tenant_runs_none_and_one_that_does_rolls_one_component_a_tenant_at_a_time(
        in_cluster, tmp_path):
    """Two Ready virtual clusters, then two upgrades of the operator and collection, each to an image that differs
    from this checkout's in its collection (tests/support/operator_images.py): first prose only (comments,
    docstrings), which must start no run and restart no tenant pod; then a changed default for the scheduler
    (its GOGC), which must run each virtual cluster once, never two at a time, and replace the schedulers' pods
    alone."""
    from sandbox.images import operator_image
    from tests.support import operator_images

    sb, api = in_cluster
    names = ("up1", "up2")
    for name in names:
        create_vc(api, NS, name, {})
    for name in names:
        wait_ready(api, NS, name, timeout=900)
    before, runs = _tenant_pods(api, names), _run_ids(api, names)
    assert before and all(restarts == 0 for _uid, restarts in before.values()), before

    archive = operator_image.ensure_archive(sb.cache_dir)
    defaults, pods_source = "roles/control_plane/defaults/main/hosted.yml", "plugins/plugin_utils/hosted_pods.py"
    defaults_text = operator_images.collection_file(archive, defaults).decode()
    pods_text = operator_images.collection_file(archive, pods_source).decode()
    gogc = "control_plane_hosted_gogc: {apiserver: 25, controller-manager: 25, scheduler: 25}"
    assert gogc in defaults_text
    prose = {defaults: defaults_text.replace("\n# ", "\n# (reworded) ", 1).encode(),
             pods_source: pods_text.replace('"""', '"""(Reworded.) ', 1).encode()}
    scheduler = {defaults: defaults_text.replace(gogc, gogc.replace("scheduler: 25", "scheduler: 50")).encode()}
    prose_image = operator_images.derive(archive, tmp_path / "prose.oci.tar", "upgrade-prose", prose)
    scheduler_image = operator_images.derive(archive, tmp_path / "scheduler.oci.tar", "upgrade-scheduler", scheduler)

    took = _upgrade(sb, api, (prose_image, tmp_path / "prose.oci.tar"))
    wait_for(lambda: _logged(api, "nothing drifted since the last run", names), 300,
             "the upgraded operator to look at both virtual clusters", interval=2)
    assert _run_ids(api, names) == runs, "an upgrade that changes no tenant started a run"
    assert _tenant_pods(api, names) == before, "an upgrade that changes no tenant restarted its pods"
    print(f"\nprose-only upgrade: operator replaced in {took:.0f}s; 0 runs, 0 of {len(before)} tenant pods replaced")

    started, watch = time.monotonic(), RunWatch(api, names, runs)
    try:
        took = _upgrade(sb, api, (scheduler_image, tmp_path / "scheduler.oci.tar"))
        wait_for(watch.all_ran, 900, "a run of each virtual cluster by the upgraded operator", interval=1)
    finally:
        watch.stop()
    ran = time.monotonic() - started
    assert _logged(api, "the collection's desired state changed since the last run", names)
    assert not watch.together, f"upgrade runs overlapped: {watch.together[:3]}"
    assert all(len(ids) == 1 for ids in watch.new.values()), f"not one run each: {watch.new}"
    after = _tenant_pods(api, names)
    replaced = sorted(name for name in before if name not in after)
    assert replaced and all("-scheduler-" in name for name in replaced), replaced
    assert all(after[name] == before[name] for name in before if "-scheduler-" not in name), (before, after)
    assert all(restarts == 0 for _uid, restarts in after.values()), after
    for name in names:
        scheduler_pod = k8s.AppsV1Api(api).read_namespaced_deployment(f"{name}-scheduler", NS).spec.template.spec
        assert ("GOGC", "50") in [(e.name, e.value) for e in scheduler_pod.containers[0].env or []]
    print(f"scheduler-default upgrade: operator replaced in {took:.0f}s, both virtual clusters run one at a time "
          f"({watch.looks} looks, none with two updating) in {ran:.0f}s; replaced {len(replaced)} of {len(before)} "
          f"tenant pods ({', '.join(replaced)}), 0 restarts")
    for name in names:
        delete_vc(api, NS, name, timeout=600)


@pytest.mark.long
def test_an_upgrade_from_the_last_release_replaces_no_tenant_pod_and_runs_one_tenant_at_a_time(
        in_cluster, tmp_path):
    """The operator image of the last release (the commit that wrote changelogs/changelog.yaml), built from that
    commit's tree, makes two virtual clusters; then this checkout's operator replaces it. The release recorded
    another kind of revision, so each virtual cluster gets one run, never two at a time; no tenant pod may be
    replaced or restart but those of the components whose template changed since the release (ROLLED_SINCE_RELEASE),
    and what the release added (the disruption budgets) is there afterwards."""
    from sandbox import operator_in_cluster
    from tests.support import operator_images

    sb, api = in_cluster
    commit = operator_images.last_release()
    if commit is None:
        pytest.skip("this clone's history does not reach the last release (shallow clone)")
    started = time.monotonic()
    release = operator_images.release_image(commit, sb.cache_dir, tmp_path)
    built = time.monotonic() - started
    names = ("rel1", "rel2")
    try:
        _upgrade(sb, api, release)
        for name in names:
            create_vc(api, NS, name, {})
        for name in names:
            wait_ready(api, NS, name, timeout=900)
        before, runs = _tenant_pods(api, names), _run_ids(api, names)

        started, watch = time.monotonic(), RunWatch(api, names, runs)
        try:
            assert operator_in_cluster.deploy(sb) == 0
            wait_for(watch.all_ran, 900, "a run of each virtual cluster by this checkout's operator", interval=1)
        finally:
            watch.stop()
        ran = time.monotonic() - started
        after = _tenant_pods(api, names)
        assert not watch.together, f"upgrade runs overlapped: {watch.together[:3]}"
        assert all(len(ids) == 1 for ids in watch.new.values()), f"not one run each: {watch.new}"
        rolled = sorted(name for name in before if name not in after)
        kept = {name: state for name, state in before.items() if name in after}
        assert all(any(f"-{c}-" in name for c in ROLLED_SINCE_RELEASE) for name in rolled), rolled
        assert all(after[name] == state for name, state in kept.items()), \
            f"the upgrade restarted tenant pods: {kept} -> {after}"
        budgets = k8s.PolicyV1Api(api).list_namespaced_pod_disruption_budget(NS).items
        components = ("etcd", "apiserver", "controller-manager", "scheduler")
        assert {b.metadata.name for b in budgets} >= {f"{n}-{c}" for n in names for c in components}
        print(f"\nrelease {commit[:12]}: its image built in {built:.0f}s; upgraded to this checkout, both virtual "
              f"clusters run one at a time ({watch.looks} looks, none with two updating) in {ran:.0f}s; "
              f"{len(rolled)} of {len(before)} tenant pods replaced ({', '.join(rolled) or 'none'}), 0 restarted")
    finally:
        for name in names:
            delete_vc(api, NS, name, timeout=600)
