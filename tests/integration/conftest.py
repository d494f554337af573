"""The integration tier in two parts: what needs only the Kubernetes binaries, then what needs the built images.

`make test` runs the first part while the images are still being built in the background, and the second once
they are there, so no test waits for a build. A test is in the second part when it uses one of IMAGE_FIXTURES,
directly or through another fixture; `-m images` selects it, `-m "not images"` leaves it out.
"""

from __future__ import annotations

import os

import pytest

from tests.support.containerd import PrivateContainerd

# Fixtures that build (or read) what `make images`, the operator image and the Konnectivity build make.
IMAGE_FIXTURES = frozenset({"oci_images", "operator_image", "proxy_binaries"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if IMAGE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.images)


@pytest.fixture(scope="module")
def containerd():
    """A private real containerd for one test module; stopping it leaves no process, shim or directory."""
    if os.geteuid() != 0:
        pytest.skip("containerd needs root (mounts, cgroups, namespaces)")
    with PrivateContainerd() as runtime:
        yield runtime
    assert not runtime.process.running()
    assert runtime.leftover_shims() == []
    assert not runtime.workdir.exists()
