"""kubectl kubenest: a tenant's kubeconfig, where a virtual cluster stands, who holds which node, node moves,
held nodes given back.

kubectl runs `kubectl-kubenest` from PATH for `kubectl kubenest ...`; it reads the same kubeconfig as kubectl
(`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`, `--context`) with the kosmos.kubenest collection's own API
client, the one its playbooks and the operator use, so exec credential plugins, tokens and client certificates all
work as they do there. Errors say what failed, on which object, and what to do; the exit status is 1 for them and
2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import os
import sys
import tempfile
from pathlib import Path

import yaml

from . import collection, edits, views

GROUP, VERSION = "kosmos.io", "v1alpha1"
MERGE_PATCH = "application/merge-patch+json"


class PluginError(Exception):
    pass


def _kubeconfig_path(args) -> str | None:
    """As kubectl picks it: --kubeconfig, else the first file of $KUBECONFIG that exists, else (in a pod
    without either) the service account, else ~/.kube/config."""
    return collection.kubeconfig().kubeconfig_path(args.kubeconfig, variables=("KUBECONFIG",))


def _api(args):
    kube_api = collection.kube_api()
    try:
        path = _kubeconfig_path(args)
        connection = (kube_api.Connection.in_cluster() if path is None
                      else kube_api.Connection.from_kubeconfig(path, args.context))
    except kube_api.KubeApiError as exc:
        raise PluginError(f"cannot load the kubeconfig: {exc}") from None
    return kube_api.KubeApi(connection)


def _namespace(args) -> str:
    if args.namespace:
        return args.namespace
    path = _kubeconfig_path(args)
    try:
        with open(path or "", encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
        name = args.context or config.get("current-context")
        current = next(c for c in config.get("contexts") or [] if c.get("name") == name)
        return (current.get("context") or {}).get("namespace") or "default"
    except (OSError, yaml.YAMLError, StopIteration, AttributeError, TypeError):
        return "default"


def _call(api, what: str, method: str, path: str, **kwargs):
    """One request; an API error is said with the object's name, what the server answered and what to do."""
    kube_api = collection.kube_api()
    try:
        return api.request(method, path, **kwargs)
    except kube_api.KubeApiError as exc:
        if exc.status is None:  # no answer: refused, timed out, a credential plugin that failed
            raise PluginError(f"{what}: {exc}") from None
        message = exc.server_message or exc.reason
        if exc.status == 404:
            raise PluginError(f"{what} not found: {message}") from None
        if exc.status == 403:
            raise PluginError(f"not allowed to read or change {what}: {message}") from None
        if exc.status == 409:
            raise PluginError(f"{what} changed while this command ran; run it again: {message}") from None
        raise PluginError(f"{what}: the API server answered {exc.status}: {message}") from None


def _vc_path(namespace: str | None, name: str = "") -> str:
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{GROUP}/{VERSION}{where}/virtualclusters" + (f"/{name}" if name else "")


def _get_vc(api, namespace: str, name: str) -> dict:
    return _call(api, f"virtualcluster {namespace}/{name}", "GET", _vc_path(namespace, name))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    """Written whole or not at all, readable by its owner only: it holds the tenant's admin credentials."""
    path = path.resolve()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_kubeconfig(args, out) -> int:
    namespace, name = views.parse_ref(args.ref, _namespace(args))
    api = _api(args)
    vc = _get_vc(api, namespace, name)
    status = vc.get("status") or {}
    ref = status.get("kubeconfigSecretRef") or {}
    if not ref.get("name"):
        raise PluginError(f"virtualcluster {namespace}/{name} has no kubeconfig yet (phase "
                          f"{status.get('phase') or 'not reconciled yet'}): the operator writes it once the control "
                          f"plane is up; follow it with kubectl kubenest status {namespace}/{name}")
    key = ref.get("key") or "kubeconfig"
    secret = _call(api, f"secret {namespace}/{ref['name']}", "GET",
                   f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
    encoded = (secret.get("data") or {}).get(key)
    if not encoded:
        raise PluginError(f"secret {namespace}/{ref['name']} has no key {key!r}")
    data = base64.b64decode(encoded)
    if args.output in (None, "-"):
        out.write(data.decode("utf-8"))
        return 0
    _write_private(Path(args.output), data)
    print(f"wrote the admin kubeconfig of {namespace}/{name} to {args.output} (mode 0600); "
          f"try: kubectl --kubeconfig {args.output} get nodes", file=sys.stderr)
    return 0


def cmd_status(args, out) -> int:
    api = _api(args)
    if args.ref:
        namespace, name = views.parse_ref(args.ref, _namespace(args))
        out.write(views.virtualcluster_detail(_get_vc(api, namespace, name), _now()) + "\n")
        return 0
    listed = _call(api, "virtualclusters", "GET", _vc_path(None if args.all_namespaces else _namespace(args)))
    items = listed.get("items") or []
    if not items:
        print("No virtual clusters found" + ("" if args.all_namespaces else f" in {_namespace(args)}") + ".",
              file=sys.stderr)
        return 0
    out.write(views.virtualcluster_rows(items, _now(), args.all_namespaces) + "\n")
    return 0


def cmd_nodes(args, out) -> int:
    api = _api(args)
    items = _call(api, "globalnodes", "GET", f"/apis/{GROUP}/{VERSION}/globalnodes").get("items") or []
    if not items:
        print("No GlobalNodes found.", file=sys.stderr)
        return 0
    protocol = collection.globalnodes()
    out.write(views.globalnode_rows(items, _now(), protocol.CLEAR_ANNOTATION, protocol.CLEAR_FAILED_ANNOTATION) + "\n")
    return 0


def cmd_move(args, out) -> int:
    namespace, name = views.parse_ref(args.ref, _namespace(args))
    api = _api(args)
    vc = _get_vc(api, namespace, name)
    plan = edits.promote if args.command == "promote" else edits.give_back
    try:
        patch, moved = plan(vc, args.nodes)
    except edits.EditError as exc:
        raise PluginError(str(exc)) from None
    if patch is None:
        out.write(f"virtualcluster {namespace}/{name} unchanged: it already "
                  f"{'asks for' if args.command == 'promote' else 'does not ask for'} {', '.join(args.nodes)}\n")
        return 0
    _call(api, f"virtualcluster {namespace}/{name}", "PATCH", _vc_path(namespace, name), body=patch,
          content_type=MERGE_PATCH)
    verb = "asks for" if args.command == "promote" else "gives back"
    out.write(f"virtualcluster {namespace}/{name} now {verb} {', '.join(moved)}; the operator moves the nodes: "
              f"kubectl kubenest status {namespace}/{name}\n")
    return 0


def cmd_clear(args, out) -> int:
    """Held nodes go back once cleared: the operator clears each GlobalNode annotated so (its clears.py)."""
    protocol = collection.globalnodes()
    api = _api(args)
    path = f"/apis/{GROUP}/{VERSION}/globalnodes/"
    found = {name: _call(api, f"globalnode {name}", "GET", path + name, ok_missing=True)
             for name in dict.fromkeys(args.nodes)}
    refused = protocol.clear_refusals(found)
    if refused:
        raise PluginError(f"only held nodes are cleared, and nothing was asked: {'; '.join(refused)}")
    for name, node in found.items():
        if protocol.CLEAR_ANNOTATION in ((node.get("metadata") or {}).get("annotations") or {}):
            out.write(f"globalnode {name} was asked to be cleared already\n")
            continue
        _call(api, f"globalnode {name}", "PATCH", path + name, content_type=MERGE_PATCH,
              body={"metadata": {"annotations": {protocol.CLEAR_ANNOTATION: "asked",
                                                 protocol.CLEAR_FAILED_ANNOTATION: None}}})
        out.write(f"globalnode {name} asked to be cleared; the operator wipes it and gives it back to the pool: "
                  "kubectl kubenest nodes\n")
    return 0


CONNECTION = ("kubeconfig", "context", "namespace")


def parser() -> argparse.ArgumentParser:
    # The connection flags go before or after the command, as with kubectl (`kubectl kubenest status -n t1`);
    # SUPPRESS keeps a subcommand's unset flag from hiding one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", default=argparse.SUPPRESS,
                        help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    common.add_argument("--context", default=argparse.SUPPRESS, help="kubeconfig context (default: its current one)")
    common.add_argument("-n", "--namespace", default=argparse.SUPPRESS,
                        help="namespace of NAME (default: the context's, then default)")
    p = argparse.ArgumentParser(prog="kubectl kubenest", description=__doc__.split("\n\n", maxsplit=1)[0],
                                parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, parents=[common])

    kc = command("kubeconfig", "the tenant's admin kubeconfig, from the Secret its status names")
    kc.add_argument("ref", metavar="NAMESPACE/NAME")
    kc.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (mode 0600) instead of stdout")
    kc.set_defaults(run=cmd_kubeconfig)

    st = command("status", "phase, conditions, nodes and progress of one or all virtual clusters")
    st.add_argument("ref", nargs="?", metavar="NAMESPACE/NAME")
    st.add_argument("-A", "--all-namespaces", action="store_true", help="list those of every namespace")
    st.set_defaults(run=cmd_status)

    nd = command("nodes", "GlobalNodes: each host node's state and the virtual cluster holding it")
    nd.set_defaults(run=cmd_nodes)

    for verb, text in (("promote", "ask for host nodes by name (spec.promoteResources.nodes)"),
                       ("return", "give nodes asked for by name back to the host")):
        mv = command(verb, text)
        mv.add_argument("ref", metavar="NAMESPACE/NAME")
        mv.add_argument("nodes", nargs="+", metavar="NODE")
        mv.set_defaults(run=cmd_move)

    cl = command("clear", "give held nodes back to the pool once cleared (the operator wipes and rejoins them)")
    cl.add_argument("nodes", nargs="+", metavar="NODE")
    cl.set_defaults(run=cmd_clear)

    rt = command("retry", "run the spec again, also one that failed for good, once its cause is fixed")
    rt.add_argument("ref", metavar="NAMESPACE/NAME")
    rt.set_defaults(run=cmd_retry)
    return p


def cmd_retry(args, out) -> int:
    """A run that failed for good is not retried: the operator waits for a new spec. A cause fixed elsewhere (a
    conflicting object removed, a kubelet given to the site) needs no new spec, only a change of the annotation
    the operator watches besides it."""
    namespace, name = views.parse_ref(args.ref, _namespace(args))
    api = _api(args)
    vc = _get_vc(api, namespace, name)
    if vc["metadata"].get("deletionTimestamp"):
        raise PluginError(f"virtualcluster {namespace}/{name} is being deleted: there is no spec to run again")
    asked = _now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    annotation = collection.run_result().RETRY_ANNOTATION
    _call(api, f"virtualcluster {namespace}/{name}", "PATCH", _vc_path(namespace, name),
          body={"metadata": {"annotations": {annotation: asked}}}, content_type=MERGE_PATCH)
    status = vc.get("status") or {}
    ready = views.condition(vc, "Ready")
    was = (f"it had failed for good: {ready.get('reason')}: {ready.get('message')}"
           if status.get("phase") == "Failed" else f"phase {status.get('phase') or 'not reconciled yet'}")
    out.write(f"virtualcluster {namespace}/{name} runs its spec again ({was}); follow it with "
              f"kubectl kubenest status {namespace}/{name}\n")
    return 0


def main(argv: list[str] | None = None, out=None) -> int:
    args = parser().parse_args(argv)
    for name in CONNECTION:
        if not hasattr(args, name):
            setattr(args, name, None)
    try:
        return args.run(args, out or sys.stdout)
    except (PluginError, views.RefError, collection.Missing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
