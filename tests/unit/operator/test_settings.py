"""kopf settings: the diff base that keeps spec.kubeconfig out of reconciles and annotations, and lets the retry
annotation in."""

from __future__ import annotations

import kopf
from kopf._cogs.structs.diffs import diff  # what kopf hands to handlers as `diff`

from kubenest_operator.settings import FINALIZER, Config, apply_kopf_settings, default_playbook_dir


def configured() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    apply_kopf_settings(settings, Config(kubeconfig=None, watch_timeout=120))
    return settings


def test_essence_is_the_spec_without_the_kubeconfig():
    storage = configured().persistence.diffbase_storage
    body = kopf.Body({
        "apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster",
        "metadata": {"name": "vc1", "namespace": "t", "labels": {"team": "a"}, "annotations": {"note": "x"}},
        "spec": {"externalIP": "192.0.2.1", "kubeconfig": "c2VjcmV0"},
        "status": {"phase": "Completed"},
    })
    assert storage.build(body=body) == {"spec": {"externalIP": "192.0.2.1"}}


def test_writing_the_kubeconfig_or_editing_labels_is_no_change():
    storage = configured().persistence.diffbase_storage
    before = kopf.Body({"metadata": {"name": "vc1", "labels": {"a": "1"}}, "spec": {"externalIP": "192.0.2.1"}})
    after = kopf.Body({"metadata": {"name": "vc1", "labels": {"a": "2"}},
                       "spec": {"externalIP": "192.0.2.1", "kubeconfig": "c2VjcmV0"}})
    assert storage.build(body=before) == storage.build(body=after)
    patch = kopf.Patch()
    storage.store(body=after, patch=patch, essence=storage.build(body=after))
    assert "c2VjcmV0" not in str(dict(patch))


def test_the_retry_annotation_is_a_change_that_survives_kopfs_own_clearing():
    settings = configured()
    storage, progress = settings.persistence.diffbase_storage, settings.persistence.progress_storage

    def essence(annotations):
        body = kopf.Body({"metadata": {"name": "vc1", "annotations": annotations}, "spec": {"externalIP": "192.0.2.1"}})
        return progress.clear(essence=storage.build(body=body))  # as kopf compares them

    plain = essence({"kubenest.kosmos.io/kopf-managed": "yes"})
    asked = essence({"kubenest.kosmos.io/kopf-managed": "yes", "kubenest.kosmos.io/retry": "2026-12-06T23:00:00Z"})
    assert plain == {"spec": {"externalIP": "192.0.2.1"}}
    assert asked == {"spec": {"externalIP": "192.0.2.1"}, "retry": "2026-12-06T23:00:00Z"}
    # The diff the handler gets: its one field is what handlers.reconcile tells a retry by.
    assert [tuple(item) for item in diff(plain, asked)] == [("add", ("retry",), None, "2026-12-06T23:00:00Z")]
    # Any other annotation of the operator's prefix stays kopf's own, out of the diff.
    assert essence({"kubenest.kosmos.io/something": "x"}) == plain


def test_watch_timeouts_finalizer_and_cluster_wide_peering():
    settings = configured()
    assert settings.watching.server_timeout == 120 and isinstance(settings.watching.server_timeout, int)
    assert settings.watching.client_timeout > settings.watching.server_timeout
    assert settings.watching.connect_timeout
    assert settings.persistence.finalizer == FINALIZER
    assert settings.peering.clusterwide is True


def test_default_playbooks_are_the_collection_ones():
    assert (default_playbook_dir() / "virtualcluster.yml").is_file()
