"""The looks' shared lists of a namespace (host_objects.py): one list for the looks that come together, never one
older than a run that ended, each virtual cluster's share handed out once. The lister is a stub that counts."""

from __future__ import annotations

import asyncio
import time

from kubenest_operator.host_objects import HostObjects


class Lister:
    """A namespace of virtual clusters a, b and c, each with one Deployment; counts its calls."""

    def __init__(self, during=None):
        self.calls, self.during = 0, during

    def __call__(self):
        self.calls += 1
        if self.during is not None:
            self.during()
        return {name: {f"Deployment/{name}-apiserver": {"metadata": {"name": f"{name}-apiserver",
                                                                     "generation": self.calls}}}
                for name in ("a", "b", "c")}


def _run(coro):
    return asyncio.run(coro)


def test_the_looks_of_a_namespace_within_the_age_share_one_list():
    objects, lister = HostObjects(60.0), Lister()

    async def looks():
        return await asyncio.gather(*(objects.of("tenants", name, lister) for name in ("a", "b", "c")))

    a, b, c = _run(looks())
    assert lister.calls == 1
    assert list(a) == ["Deployment/a-apiserver"] and list(b) == ["Deployment/b-apiserver"]
    assert list(c) == ["Deployment/c-apiserver"]
    # another namespace has lists of its own
    _run(objects.of("others", "a", lister))
    assert lister.calls == 2


def test_a_share_is_handed_out_once_and_a_second_look_lists_again():
    objects, lister = HostObjects(60.0), Lister()
    first = _run(objects.of("tenants", "a", lister))
    again = _run(objects.of("tenants", "a", lister))
    assert lister.calls == 2
    assert first["Deployment/a-apiserver"]["metadata"]["generation"] == 1
    assert again["Deployment/a-apiserver"]["metadata"]["generation"] == 2
    # b's share of the second list is still there
    assert _run(objects.of("tenants", "b", lister))["Deployment/b-apiserver"]["metadata"]["generation"] == 2
    assert lister.calls == 2


def test_a_list_older_than_its_age_or_than_a_run_that_ended_is_not_used():
    objects, lister = HostObjects(0.05), Lister()
    _run(objects.of("tenants", "a", lister))
    time.sleep(0.1)
    _run(objects.of("tenants", "b", lister))
    assert lister.calls == 2  # too old

    objects, lister = HostObjects(60.0), Lister()
    _run(objects.of("tenants", "a", lister))
    objects.changed("tenants")  # a run in the namespace ended
    _run(objects.of("tenants", "b", lister))
    assert lister.calls == 2
    objects.changed("others")  # a run elsewhere changes nothing here
    _run(objects.of("tenants", "c", lister))
    assert lister.calls == 2


def test_a_list_during_which_a_run_ended_serves_its_caller_and_is_not_kept():
    objects = HostObjects(60.0)
    lister = Lister(during=lambda: objects.changed("tenants"))
    first = _run(objects.of("tenants", "a", lister))
    assert "Deployment/a-apiserver" in first
    _run(objects.of("tenants", "b", lister))
    assert lister.calls == 2


def test_a_namespace_of_one_virtual_cluster_keeps_nothing_between_looks():
    objects = HostObjects(60.0)
    _run(objects.of("solo", "a", lambda: {"a": {"Secret/a-ca": {}}}))
    assert objects._shares["solo"][1] == {}
