"""The operator in the sandbox's host cluster: its image onto the control-plane machines, then
playbooks/operator_install.yml (what an admin runs, with `kubectl apply -k deploy/operator` underneath).

There is no registry: the image archive is copied into each control-plane machine and imported into its
containerd, and the control-plane images the operator imports on promoted nodes (`kubenest_images_dir`) reach its
pods through a local PersistentVolume on those machines (the operator's namespace enforces Pod Security
`restricted`, which allows no hostPath).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox.images.build_images import CILIUM_CRDS, sha256_file
from sandbox.machines.config import NETWORK_VARS, REPO_ROOT, RETURN_VARS, Sandbox
from sandbox.machines.machine import Machine
from sandbox.machines.pki import client_files

NAMESPACE, NAME = "kubenest-system", "kubenest-operator"
IMAGE_IN_MACHINE = "var/lib/kubenest/operator-image.oci.tar"
IMAGES_IN_MACHINE = "/var/lib/kubenest/operator-images"  # also the path in the operator's pods
IMAGES_VOLUME = "kubenest-operator-images"


def log(message: str) -> None:
    print(f"[operator] {message}", file=sys.stderr, flush=True)


def _copy_if_changed(src: Path, dest: Path) -> bool:
    if dest.is_file() and dest.stat().st_size == src.stat().st_size and sha256_file(dest) == sha256_file(src):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.copyfile(src, tmp)
    tmp.chmod(0o644)
    tmp.replace(dest)
    return True


def control_planes(sb: Sandbox) -> list[Machine]:
    return [Machine(sb, n) for n in sb.nodes if n.role == "control_plane"]


def image_archive(sb: Sandbox) -> tuple[Path, str]:
    from sandbox.images import operator_image

    archive = operator_image.ensure_archive(sb.cache_dir)
    return archive, f"kubenest.local/{operator_image.NAME}:{operator_image.version()}"


def place_image_and_catalog(sb: Sandbox, archive: Path, images_dir: Path) -> None:
    catalog = [images_dir / "images.json", *sorted(images_dir.glob("*.oci.tar")),
               *[path for path in (images_dir / CILIUM_CRDS,) if path.is_file()]]
    for machine in control_planes(sb):
        if _copy_if_changed(archive, machine.root / IMAGE_IN_MACHINE):
            log(f"{machine.name}: importing the operator image")
            machine.nsenter(["ctr", "-n", "k8s.io", "images", "import", f"/{IMAGE_IN_MACHINE}"], timeout=300)
        for path in catalog:
            _copy_if_changed(path, machine.root / IMAGES_IN_MACHINE.lstrip("/") / path.name)


def images_volume(sb: Sandbox) -> list[dict]:
    """A local PersistentVolume of the catalog on the control-plane machines and the claim the pods mount."""
    hosts = [m.name for m in control_planes(sb)]
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": IMAGES_VOLUME, "labels": {"app.kubernetes.io/part-of": "kosmos.kubenest"}},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "persistentVolumeReclaimPolicy": "Retain", "storageClassName": IMAGES_VOLUME,
                  "local": {"path": IMAGES_IN_MACHINE},
                  "claimRef": {"namespace": NAMESPACE, "name": IMAGES_VOLUME},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": IMAGES_VOLUME, "namespace": NAMESPACE,
                      "labels": {"app.kubernetes.io/part-of": "kosmos.kubenest"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": IMAGES_VOLUME, "volumeName": IMAGES_VOLUME,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]


def install_vars(sb: Sandbox, image: str) -> dict:
    files = client_files(sb)
    return {
        "kubenest_admin_kubeconfig": str(sb.state_dir / "kubeconfig"),
        "kubenest_operator_image": image,
        "kubenest_operator_agent_ca_file": files["ca"], "kubenest_operator_agent_cert_file": files["cert"],
        "kubenest_operator_agent_key_file": files["key"],
        "kubenest_operator_agent_ca_path": str(sb.pki_dir / "ca"),
        "kubenest_operator_site_vars": {"kubenest_images_dir": IMAGES_IN_MACHINE, **NETWORK_VARS, **RETURN_VARS},
        "kubenest_operator_extra_volumes": [
            {"name": "images", "persistentVolumeClaim": {"claimName": IMAGES_VOLUME, "readOnly": True}}],
        "kubenest_operator_extra_mounts": [{"name": "images", "mountPath": IMAGES_IN_MACHINE, "readOnly": True}],
    }


def _apply(kubeconfig: Path, objects: list[dict]) -> None:
    from kubernetes import config, dynamic
    from kubernetes.client.exceptions import ApiException

    client = dynamic.DynamicClient(config.new_client_from_config(str(kubeconfig)))
    for obj in objects:
        api = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace")
        try:
            api.create(body=obj, namespace=namespace)
        except ApiException as exc:
            if exc.status != 409:
                raise


def deploy(sb: Sandbox, image_and_archive: tuple[str, Path] | None = None) -> int:
    """Install (or upgrade to) the operator of this checkout's image, or of `image_and_archive`'s."""
    kubeconfig = sb.state_dir / "kubeconfig"
    group_vars = yaml.safe_load((sb.state_dir / "group_vars" / "all.yml").read_text())
    started = time.monotonic()
    if image_and_archive is None:
        archive, image = image_archive(sb)
    else:
        image, archive = image_and_archive
    place_image_and_catalog(sb, archive, Path(group_vars["kubenest_images_dir"]))
    namespace = yaml.safe_load((REPO_ROOT / "deploy/operator/namespace.yaml").read_text())
    _apply(kubeconfig, [namespace, *images_volume(sb)])
    extra = sb.state_dir / "operator-install.json"
    extra.write_text(json.dumps(install_vars(sb, image)))
    extra.chmod(0o600)
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"),
                           str(REPO_ROOT / "playbooks/operator_install.yml"), "-e", f"@{extra}"],
                          capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], file=sys.stderr)
        log("error: playbooks/operator_install.yml failed")
        return 2
    log(f"{image} running in {NAMESPACE} ({time.monotonic() - started:.0f}s); logs: kubectl --kubeconfig "
        f"{kubeconfig} -n {NAMESPACE} logs deploy/{NAME}")
    return 0


def replicas(sb: Sandbox) -> int | None:
    """Replicas the Deployment asks for; None when it does not exist or the cluster does not answer."""
    from kubernetes import client, config

    try:
        apps = client.AppsV1Api(config.new_client_from_config(str(sb.state_dir / "kubeconfig")))
        return apps.read_namespaced_deployment(NAME, NAMESPACE, _request_timeout=10).spec.replicas
    except Exception:  # no kubeconfig, no cluster answering, no Deployment: nothing runs there
        return None


def scale(sb: Sandbox, count: int, timeout: float = 300) -> None:
    """Scale the operator and wait until the pods are gone (0) or one is ready."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(sb.state_dir / "kubeconfig"))
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.patch_namespaced_deployment_scale(NAME, NAMESPACE, {"spec": {"replicas": count}})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={NAME}").items
        if count == 0 and not pods:
            return
        status = apps.read_namespaced_deployment(NAME, NAMESPACE).status
        if count > 0 and (status.available_replicas or 0) >= 1:
            return
        time.sleep(1)
    raise TimeoutError(f"{NAMESPACE}/{NAME} not scaled to {count} in {timeout:.0f}s")
