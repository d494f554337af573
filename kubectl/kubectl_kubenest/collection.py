"""The kosmos.kubenest collection's API client, found where Ansible finds the collection.

The plugin makes its requests with the collection's own client (plugins/module_utils/kube_api.py), so a
kubeconfig works here exactly as it works for the playbooks and the operator. In a Python environment that has
the collection as a package (the operator's image, a checkout's .venv) it is imported as is; otherwise it is
looked up in the collection paths Ansible searches: $ANSIBLE_COLLECTIONS_PATH, ~/.ansible/collections and
/usr/share/ansible/collections.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

PACKAGE = "ansible_collections.kosmos.kubenest.plugins.module_utils"
DEFAULT_PATHS = ("~/.ansible/collections", "/usr/share/ansible/collections")


class Missing(Exception):
    """The collection is nowhere to be found."""


def search_paths(environ=None) -> list[str]:
    """The directories that may hold ansible_collections/, in Ansible's order."""
    environ = os.environ if environ is None else environ
    configured = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS") or ""
    paths = [p for p in configured.split(os.pathsep) if p] or list(DEFAULT_PATHS)
    return [os.path.expanduser(p) for p in paths]


def kube_api() -> ModuleType:
    return _module("kube_api")


def globalnodes() -> ModuleType:
    return _module("globalnodes")


def kubeconfig() -> ModuleType:
    return _module("kubeconfig")


def run_result() -> ModuleType:
    return _module("run_result")


def _module(name: str) -> ModuleType:
    module = f"{PACKAGE}.{name}"
    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    for path in search_paths():
        if os.path.isdir(os.path.join(path, "ansible_collections", "kosmos", "kubenest")) and path not in sys.path:
            sys.path.append(path)
            try:
                return importlib.import_module(module)
            except ImportError:
                continue
    raise Missing("the kosmos.kubenest collection was not found (searched: " + ", ".join(search_paths())
                  + "): install it with ansible-galaxy collection install kosmos.kubenest, or name its directory "
                  "in ANSIBLE_COLLECTIONS_PATH")
