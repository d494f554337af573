"""``kubenest-operator``: watch VirtualClusters and Nodes, run the collection's playbooks with ansible-runner."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

import kopf
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApi, KubeApiError

from . import __version__, shards
from .extravars import load_site_vars
from .kube import kubeconfig_path
from .runs import RunDirs, UnsafeRunsDir
from .settings import DEFAULT_PEERING, Config, default_playbook_dir, default_runs_dir

log = logging.getLogger("kubenest_operator")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


DNS_PART = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
REGISTRY = re.compile(rf"{DNS_PART}(\.{DNS_PART})*(:[0-9]{{1,5}})?")


def registry(text: str) -> str:
    if not REGISTRY.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a registry host[:port]")
    return text


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


# Options that set the Config field of their name as given. Their defaults are Config's, declared once in settings.py.
PLAIN_OPTIONS = (
    ("--max-parallel", positive_int, "playbook runs at once"),
    ("--artifacts-keep", non_negative_int, "finished runs whose private data dir is kept for debugging"),
    ("--run-timeout", positive_int, "seconds a run may take"),
    ("--backoff-base", float, "first retry delay in seconds after a failed run"),
    ("--backoff-max", float, "longest retry delay in seconds, never below --backoff-base"),
    ("--progress-interval", float, "least seconds between status.progress updates"),
    ("--watch-timeout", positive_int, "seconds after which a watch request is renewed"),
    ("--node-wait-interval", float, "seconds between looks at a virtual cluster waiting for nodes"),
    ("--resync-interval", float, "seconds between full passes over Nodes and GlobalNodes; the first at start"),
    ("--cert-check-interval", float,
     "seconds between looks at each virtual cluster's certificates; a run renews those inside their renewal window"),
    ("--agent-audit-interval", float, "seconds between passes writing the node agents' audit lines, taken off the "
                                      "nodes by runs, to this log, logger kubenest.agent-audit"),
)


def _field(flag: str) -> str:
    return flag[2:].replace("-", "_")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kubenest-operator", description=__doc__)
    p.add_argument("--version", action="version", version=f"kubenest-operator {__version__}")
    p.add_argument("--kubeconfig", help="host cluster kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="extend", nargs="+", default=[], metavar="NS",
                       help="serve VirtualClusters of these namespaces (repeatable; kopf globs allowed)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="serve all namespaces (the default)")
    p.add_argument("--cluster-scoped", action=argparse.BooleanOptionalAction, default=Config.cluster_scoped,
                   help="serve Nodes and GlobalNodes (their sync, clears, the reservations of vanished virtual "
                        "clusters); of replicas that share the work by namespace, exactly one shard does "
                        "(default: on)")
    p.add_argument("--playbook-dir", type=Path, default=None,
                   help="directory holding virtualcluster.yml (default: the installed kosmos.kubenest playbooks)")
    for flag, kind, text in PLAIN_OPTIONS:
        p.add_argument(flag, type=kind, default=getattr(Config, _field(flag)), help=text + " (default %(default)g)")
    p.add_argument("--max-parallel-per-namespace", type=positive_int, default=None, metavar="N",
                   help="playbook runs at once for one namespace (default: half of --max-parallel, at least 1)")
    p.add_argument("--max-parallel-upgrades", type=positive_int, default=Config.max_parallel_upgrades, metavar="N",
                   help="of --max-parallel, runs at once that a collection upgrade causes (default %(default)s)")
    peer = p.add_mutually_exclusive_group()
    peer.add_argument("--peering", default=DEFAULT_PEERING,
                      help="ClusterKopfPeering shared by the replicas (default %(default)s)")
    peer.add_argument("--standalone", action="store_true", help="no peering: for a single local process")
    p.add_argument("--priority", type=int, default=None,
                   help="peering priority (default: below every live peer, so running replicas keep working)")
    p.add_argument("--runs-dir", type=Path, default=None,
                   help=f"where run directories are made (default {default_runs_dir()})")
    p.add_argument("--site-vars", type=Path, default=None, metavar="FILE",
                   help="YAML mapping of variables for every run, e.g. kubenest_agent_ca_file/cert_file/key_file "
                        "(the agent client credentials) and kubenest_images_dir")
    p.add_argument("--allowed-registry", action="append", default=[], metavar="HOST[:PORT]", dest="allowed_registries",
                   type=registry,
                   help="a registry VirtualClusters may take images from (repeat; default: any)")
    p.add_argument("--spec-kubeconfig", action="store_true",
                   help="compatibility: also write the admin kubeconfig into spec.kubeconfig (restored if changed)")
    p.add_argument("--liveness", metavar="URL", help="serve a liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    p.add_argument("--metrics-address", metavar="HOST:PORT", type=metrics_address,
                   help="serve Prometheus metrics at http://HOST:PORT/metrics, e.g. :9090 (docs/metrics.md)")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    return p


def metrics_address(text: str) -> str:
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (HOST may be empty: every address)")
    return text


def config_from_args(args: argparse.Namespace) -> Config:
    plain = {_field(flag): getattr(args, _field(flag)) for flag, _kind, _text in PLAIN_OPTIONS}
    return Config(**dict(
        plain,
        kubeconfig=kubeconfig_path(args.kubeconfig),
        namespaces=tuple(args.namespace),
        cluster_scoped=args.cluster_scoped,
        playbook_dir=(args.playbook_dir or default_playbook_dir()).resolve(),
        max_parallel_upgrades=min(args.max_parallel, args.max_parallel_upgrades),
        max_parallel_per_namespace=min(args.max_parallel, args.max_parallel_per_namespace
                                       or max(1, args.max_parallel // 2)),
        peering=None if args.standalone else args.peering,
        priority=args.priority,
        runs_dir=(args.runs_dir or default_runs_dir()).resolve(),
        backoff_max=max(args.backoff_max, args.backoff_base),
        liveness=args.liveness,
        site_vars=args.site_vars.resolve() if args.site_vars else None,
        allowed_registries=tuple(args.allowed_registries),
        spec_kubeconfig=args.spec_kubeconfig,
    ))


def join_shard(api: KubeApi, config: Config, identity: str, priority: int | None) -> int:
    """Join the shard's peering unless a live replica of another serves what this one would; looked at again
    after joining, for a replica of another shard that started at the same moment."""
    from .peering import claim_priority, leave

    shards.refuse_overlaps(api, config.shard, config.peering, identity)
    # Marked before joining: a live replica in a peering without a mark counts as serving everything.
    shards.mark(api, config.peering, config.shard)
    if priority is None:
        priority = claim_priority(api, config.peering, identity, settle=config.peering_settle)
    try:
        shards.refuse_overlaps(api, config.shard, config.peering, identity)
    except shards.Overlap:
        leave(api, config.peering, identity)
        raise
    return priority


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    kopf.configure(verbose=args.verbose, log_prefix=True)  # to stderr
    try:
        config = config_from_args(args)
    except FileNotFoundError as exc:
        log.error("%s", exc)
        return 2
    if config.site_vars is not None:
        try:
            load_site_vars(config.site_vars)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            log.error("--site-vars %s: %s", config.site_vars, exc)
            return 2
    try:
        RunDirs(config.runs_dir, config.artifacts_keep).ensure_private()
    except (OSError, UnsafeRunsDir) as exc:
        log.error("--runs-dir: %s", exc)
        return 2
    if not (config.playbook_dir / config.playbook).is_file():
        log.error("no %s in %s (see --playbook-dir)", config.playbook, config.playbook_dir)
        return 2

    # Imported for their kopf handlers, registered on kopf's default registry.
    from . import (  # noqa: F401
        activities,
        agent_audit,
        clears,
        events,
        globalnodes,
        handlers,
        looks,
        spec_kubeconfig,
    )

    looks.register(config)
    from .context import Context
    from .peering import own_identity

    try:
        ctx = Context.create(config)
        ctx.api.connection.bearer()  # an exec plugin that fails says so now, not at kopf's first login
    except (KubeApiError, OSError, ValueError) as exc:
        log.error("cannot use the kubeconfig: %s", " ".join(str(exc).split()))
        return 2
    if args.metrics_address:
        from . import metrics

        namespaces = config.namespaces

        def list_objects():  # what this shard serves, so that replicas' figures add up
            return (ctx.api.virtualclusters_now(namespaces),
                    ctx.api.globalnodes_now() if config.cluster_scoped else [])

        try:
            metrics.serve(args.metrics_address, list_objects)
        except OSError as exc:
            log.error("--metrics-address %s: %s", args.metrics_address, exc)
            return 2
    identity = own_identity()
    priority = config.priority
    if config.peering is not None:
        try:
            with ctx.api.host.client() as api:
                priority = join_shard(api, config, identity, priority)
        except (KubeApiError, RuntimeError) as exc:
            log.error("cannot join peering %r: %s", config.peering, exc)
            return 1
        except shards.Overlap as exc:
            log.error("not starting: %s", exc)
            return 2
        ctx.shard_guard = shards.ShardGuard(shards.peerings_reader(ctx.api.host), config.shard, config.peering,
                                            identity, every=config.resync_interval)
    log.info("kubenest-operator %s: playbooks %s, %s, %s", __version__, config.playbook_dir,
             config.shard.describe(),
             f"peering {config.peering} (priority {priority})" if config.peering else "standalone")
    kopf.run(
        clusterwide=not config.namespaces,
        namespaces=list(config.namespaces),
        standalone=config.peering is None,
        peering_name=config.peering,
        priority=priority,
        identity=identity,
        liveness_endpoint=config.liveness,
        memo=kopf.Memo(ctx=ctx),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
