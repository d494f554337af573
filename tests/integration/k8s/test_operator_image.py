"""The operator's image (sandbox/images/operator_image.py): small enough to say, runs as its own non-root user
on a read-only root filesystem with only the Deployment's emptyDirs writable, and holds the operator, Ansible and
the collection installed from its tarball with the collections it declares."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile

import pytest

from tests.support import k8sbin

pytestmark = pytest.mark.slow
NAMESPACE = "kubenest-operator-image-test"
WRITABLE = ("/var/lib/kubenest-operator", "/tmp")  # the emptyDirs of deploy/operator/deployment.yaml


@pytest.fixture(scope="module")
def operator_image() -> dict:
    proc = subprocess.run([sys.executable, str(k8sbin.REPO_ROOT / "sandbox/images/operator_image.py")],
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    archive = proc.stdout.strip().splitlines()[-1]
    with tarfile.open(archive) as outer:
        index = json.load(outer.extractfile("index.json"))
        manifest = json.load(outer.extractfile("blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]))
        config = json.load(outer.extractfile("blobs/sha256/" + manifest["config"]["digest"].split(":")[1]))
    ref = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    size = sum(layer["size"] for layer in manifest["layers"])
    print(f"\n{ref}: {size / 2**20:.1f} MiB compressed")
    return {"archive": archive, "ref": ref, "config": config["config"]}


def _run(containerd, ref: str, name: str, *command: str, scratch) -> subprocess.CompletedProcess:
    """`command` in a container of the image with the Deployment's writable paths as fresh emptyDir-like dirs."""
    containerd.track_namespace(NAMESPACE)
    mounts = []
    for i, path in enumerate(WRITABLE):
        source = scratch / name / str(i)
        source.mkdir(parents=True)
        source.chmod(0o1777)  # as open as an emptyDir
        mounts += ["--mount", f"type=bind,src={source},dst={path},options=rbind:rw"]
    return containerd.ctr("run", "--rm", "--read-only", *mounts, ref, name, *command, namespace=NAMESPACE,
                          timeout=300, check=False)


def test_the_image_runs_the_operator_as_non_root_on_a_read_only_root(containerd, operator_image, tmp_path):
    config = operator_image["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/kubenest/bin/kubenest-operator"]
    containerd.import_image(operator_image["archive"], namespace=NAMESPACE)

    def run(name: str, *command: str) -> subprocess.CompletedProcess:
        return _run(containerd, operator_image["ref"], name, *command, scratch=tmp_path)

    ident = run("op-id", "id", "-u")
    assert (ident.returncode, ident.stdout.strip()) == (0, "65532"), ident.stderr
    usage = run("op-help", "/opt/kubenest/bin/kubenest-operator", "--help")
    assert usage.returncode == 0 and "--all-namespaces" in usage.stdout, usage.stderr
    imports = run("op-imports", "python", "-c", "import kopf, ansible_runner, websockets, cryptography; "
                  "import kubenest_operator.handlers, kubenest_binder; "
                  "from kubenest_operator.settings import default_playbook_dir; print(default_playbook_dir())")
    assert imports.returncode == 0, imports.stderr
    # The operator, the binder and the collection talk to the API through the collection's client alone.
    sdk = run("op-no-sdk", "python", "-c", "import kubernetes")
    assert sdk.returncode != 0 and "No module named 'kubernetes'" in sdk.stderr, (sdk.stdout, sdk.stderr)
    assert imports.stdout.strip() == "/opt/kubenest/collections/ansible_collections/kosmos/kubenest/playbooks"
    collections = run("op-collections", "ansible-galaxy", "collection", "list", "--format", "json")
    assert collections.returncode == 0, collections.stderr
    installed = {name for path in json.loads(collections.stdout).values() for name in path}
    # The collection and what galaxy.yml declares, nothing more (ansible-core lists its own internal one too).
    assert installed - {"ansible._protomatter"} == {"kosmos.kubenest", "ansible.posix"}, installed
    # A module of the collection runs: Ansible finds it and keeps its temp files where it may write.
    module = run("op-module", "ansible", "localhost", "-m", "kosmos.kubenest.certificate",
                 "-a", "path=/tmp/ca is_ca=true common_name=image-test-ca")
    assert module.returncode == 0 and "CHANGED" in module.stdout, module.stdout + module.stderr
    written = run("op-readonly", "touch", "/opt/kubenest/x")
    assert written.returncode != 0 and "Read-only file system" in written.stderr + written.stdout
