"""Kept-alive clients of the host's API server and of each tenant's, lent to one worker thread at a time.

The periodic look (looks.py) asks the host for a control plane's objects and each tenant's API for its Nodes
every --resync-interval. A client made for every look pays a TLS handshake, the loading of its certificates and
the parsing of the kubeconfig each time, which at a thousand tenants was most of the operator's CPU. These are
the collection's own client (module_utils/kube_api), which returns the API's JSON as it is.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import threading
from collections.abc import Iterator

import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import Connection, KubeApi

# Tenants whose clients are kept; beyond that the one looked at longest ago closes its clients.
TENANTS_KEPT = 4096


class Lender:
    """Clients of one API server: a lent client is the borrower's alone until it comes back; up to `keep` idle
    ones stay connected."""

    def __init__(self, connection: Connection, timeout: float, keep: int):
        self.connection = connection
        self.timeout = timeout
        self.keep = keep
        self._idle: list[KubeApi] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def client(self) -> Iterator[KubeApi]:
        with self._lock:
            api = self._idle.pop() if self._idle else None
        if api is None:
            api = KubeApi(self.connection, timeout=self.timeout)
        try:
            yield api
        finally:
            with self._lock:
                kept = len(self._idle) < self.keep
                if kept:
                    self._idle.append(api)
            if not kept:
                api.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for api in idle:
            api.close()


class TenantClients:
    """A Lender per virtual cluster, made from its admin kubeconfig and made again when that changes."""

    def __init__(self, timeout: float, kept: int = TENANTS_KEPT):
        self.timeout = timeout
        self.kept = kept
        self._lenders: collections.OrderedDict[tuple[str, str], tuple[str, Lender]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def lender(self, namespace: str, name: str, kubeconfig: bytes) -> Lender:
        """Raises kube_api.ConfigError (or yaml.YAMLError) for a kubeconfig that cannot be used."""
        key, digest = (namespace, name), hashlib.sha256(kubeconfig).hexdigest()
        with self._lock:
            known = self._lenders.get(key)
            if known is not None and known[0] == digest:
                self._lenders.move_to_end(key)
                return known[1]
        lender = Lender(Connection.from_config(yaml.safe_load(kubeconfig), None, where=f"of {namespace}/{name}"),
                        self.timeout, keep=1)
        closed = []
        with self._lock:
            if key in self._lenders:
                closed.append(self._lenders.pop(key)[1])
            self._lenders[key] = (digest, lender)
            while len(self._lenders) > self.kept:
                closed.append(self._lenders.popitem(last=False)[1][1])
        for old in closed:
            old.close()
        return lender

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            known = self._lenders.pop((namespace, name), None)
        if known is not None:
            known[1].close()

    def close(self) -> None:
        with self._lock:
            lenders, self._lenders = list(self._lenders.values()), collections.OrderedDict()
        for _digest, lender in lenders:
            lender.close()
