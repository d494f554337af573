# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which host objects belong to a virtual cluster: those its runs may update and its deletion may remove."""

from __future__ import annotations

VC_KIND = "VirtualCluster"
VC_GROUP = "kosmos.io/"
MANAGED_BY = ("app.kubernetes.io/managed-by", "kosmos.kubenest")
VC_LABEL = "kosmos.io/virtualcluster"


def _metadata(obj):
    return (obj or {}).get("metadata") or {}


def owned_by(obj, name, uid):
    """With the VirtualCluster's uid: an owner reference to exactly it. Without one (a run with no CR
    behind it): no controller but us, and our labels."""
    metadata = _metadata(obj)
    references = metadata.get("ownerReferences") or []
    if uid:
        return any(ref.get("kind") == VC_KIND and str(ref.get("apiVersion", "")).startswith(VC_GROUP)
                   and ref.get("name") == name and ref.get("uid") == uid for ref in references)
    labels = metadata.get("labels") or {}
    return (not any(ref.get("controller") for ref in references)
            and labels.get(MANAGED_BY[0]) == MANAGED_BY[1] and labels.get(VC_LABEL) == name)


def classify(listings, name, uid):
    """Listings: (query, objects) pairs, the query naming `api_version`, `kind` and optionally `names` (only
    those are looked at). Returns references (no object content: Secrets stay out of logs) to the owned
    objects and `Kind namespace/name` of the others."""
    owned, foreign = [], []
    for query, objects in listings:
        names = query.get("names")
        for obj in objects or []:
            metadata = _metadata(obj)
            if names is not None and metadata.get("name") not in names:
                continue
            if owned_by(obj, name, uid):
                owned.append({"api_version": query.get("api_version"), "kind": query.get("kind"),
                              "namespace": metadata.get("namespace"), "name": metadata.get("name")})
            else:
                foreign.append("%s %s/%s" % (query.get("kind"), metadata.get("namespace"), metadata.get("name")))
    return {"owned": owned, "foreign": foreign}
