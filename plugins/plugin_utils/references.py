# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of the values a VirtualCluster author controls that end up in names, images and flags.

The CRD carries the same patterns (deploy/crds); these run again on the controller so a playbook fed by hand,
or by AWX, refuses what admission would have refused.
"""

from __future__ import annotations

import ipaddress
import re

# Letter first: names that become Service names must be DNS-1035 labels.
DNS_1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS_1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A registry host (with port) and optional path, as in an image reference before the image name.
IMAGE_REPOSITORY = (
    r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?"
    r"(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$"
)
IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
KUBERNETES_VERSION = r"^v1\.[0-9]{1,3}\.[0-9]{1,3}$"
# The longest suffix of a derived name (<name>-controller-manager) and of a StatefulSet pod's
# controller-revision-hash label (<name>-etcd-<10 chars>) both fit in 63 with names up to this.
VIRTUAL_CLUSTER_NAME_MAX = 40
IMAGE_REPOSITORY_MAX = 200


class InvalidValue(ValueError):
    """A value that must not reach a manifest."""


def _matches(pattern, value):
    return isinstance(value, str) and re.match(pattern, value) is not None and "\n" not in value


def check_name(what, value, max_length=63, pattern=DNS_1035_LABEL):
    if not _matches(pattern, value) or len(value) > max_length:
        raise InvalidValue("%s must be a DNS label of at most %d characters starting with a letter, got %r"
                           % (what, max_length, value))
    return value


def check_image_repository(value):
    if not _matches(IMAGE_REPOSITORY, value) or len(value) > IMAGE_REPOSITORY_MAX:
        raise InvalidValue("imageRepository must be a registry host[:port] with an optional path "
                           "(e.g. registry.example.com:5000/kube), got %r" % (value,))
    return value


def check_image(value):
    """A whole image reference: repository/name:tag."""
    repository, _sep, tag = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if "/" in tag or not _matches(IMAGE_TAG, tag) or not _matches(IMAGE_REPOSITORY, repository) \
            or len(repository) > IMAGE_REPOSITORY_MAX + 64:
        raise InvalidValue("image must be a reference like registry.example.com/etcd:<tag>, got %r" % (value,))
    return value


def check_kubernetes_version(value):
    if not _matches(KUBERNETES_VERSION, value):
        raise InvalidValue("kubernetesVersion must look like v1.<minor>.<patch>, got %r" % (value,))
    return value


def check_ip(what, value):
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise InvalidValue("%s must be an IP address, got %r" % (what, value)) from None


def check_client_address(what, value):
    """An address clients elsewhere can connect to: an IP that is not loopback, unspecified, link-local,
    multicast or the broadcast address (the CRD's rule, ip(self).isGlobalUnicast(), refuses the same)."""
    address = ipaddress.ip_address(check_ip(what, value))
    for unusable, name in ((address.is_loopback, "loopback"), (address.is_unspecified, "unspecified"),
                           (address.is_link_local, "link-local"), (address.is_multicast, "multicast"),
                           (address == ipaddress.IPv4Address("255.255.255.255"), "the broadcast address")):
        if unusable:
            raise InvalidValue("%s must be an address clients can reach, not %s: %s" % (what, name, address))
    return str(address)


def check_cidr(what, value):
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except (TypeError, ValueError):
        raise InvalidValue("%s must be a network in CIDR notation, got %r" % (what, value)) from None


def registry_of(repository):
    """The registry host[:port] of an image repository (its first path element)."""
    return repository.split("/", 1)[0]


def check_registry_allowed(repository, allowed):
    """With an allow-list (host[:port] entries), the repository's registry must be on it."""
    if allowed and registry_of(repository) not in allowed:
        raise InvalidValue("imageRepository %r is not from an allowed registry (%s)"
                           % (repository, ", ".join(sorted(allowed))))
    return repository
