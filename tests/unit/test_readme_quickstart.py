"""README's quick start stays what tests/e2e/test_quickstart.py runs: the site's variables it sets, the steps in
order each with what undoes it, the operator's tag the image build writes."""

from __future__ import annotations

import re

from sandbox.images import operator_image
from tests.support import quickstart

# What the e2e test sets for the kubeadm host, in the README's order.
SITE = ["KUBECONFIG", "MACHINES", "WORKER", "REGISTRY", "REGISTRY_CERT_DIR", "IMAGE_REPOSITORY", "PKI", "PATH"]


def test_the_site_block_exports_what_the_test_sets():
    assert quickstart.read().site_variables == SITE


def test_steps_are_numbered_in_order_and_every_undo_undoes_a_step():
    quick = quickstart.read()
    assert list(quick.steps) == list(range(1, len(quick.steps) + 1))
    assert set(quick.undos) <= set(quick.steps)


def test_the_steps_use_only_the_sites_variables_and_their_own():
    quick = quickstart.read()
    used = set(re.findall(r"\$\{?([A-Z_]+)", "\n".join([*quick.steps.values(), *quick.undos.values()])))
    assert used <= set(SITE) | {"PWD"}, used - set(SITE)


def test_the_operator_image_named_is_the_one_make_push_images_writes():
    quick = quickstart.read()
    tags = re.findall(r"kubenest-operator:([^\s\\]+)", "\n".join(quick.steps.values()))
    assert tags == [operator_image.version()]
