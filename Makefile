# kosmos.kubenest — developer entry points. `make up` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTEST := $(VENV)/bin/pytest
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt constraints.txt agent/pyproject.toml operator/pyproject.toml kubectl/pyproject.toml 2>/dev/null | sha256sum | cut -c1-12)
export KUBENEST_CACHE ?= $(HOME)/.cache/kubenest
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# KUBENEST_HOST=kubeadm: the host cluster is upstream kubeadm's on bare machines (sandbox/kubeadm), the agent
# installed over SSH; the in-cluster operator and the sample are not deployed there (README's quick start does).
KUBENEST_HOST ?= collection
up: install k8s images
ifeq ($(KUBENEST_HOST),kubeadm)
	$(PY) -m sandbox.kubeadm up
else
	$(MAKE) --no-print-directory nodes
	$(PY) -m sandbox.cluster up
	$(PY) -m sandbox.operator deploy
	$(PY) -m sandbox.sample
endif

down:
	-@[ -x $(PY) ] && $(PY) -m sandbox.operator stop
	@if [ -x $(PY) ]; then $(PY) -m sandbox.registry down; else python3 -m sandbox.registry down; fi
	$(MAKE) --no-print-directory nodes-down
	rm -rf .sandbox/registry .sandbox/cluster-pki .sandbox/group_vars .sandbox/host_vars .sandbox/kubeconfig \
	  .sandbox/sample.kubeconfig .sandbox/operator.log .sandbox/operator.pid .sandbox/operator.mode .sandbox/operator-install.json \
	  .sandbox/host.json .sandbox/kubeadm

.PHONY: help install system-deps lint ruff ansible-lint sanity changelog-lint role-readmes diagrams unit integration integration-agent integration-early integration-images e2e e2e-kubeadm prebuild prebuild-images prebuild-machines test test-long bench bench-scale bench-tenants conformance conformance-suite k8s k8s-previous cilium runtime images operator-image push-images apiserver up down clean

help:
	@echo "make up        local sandbox host cluster, operator and a sample virtual cluster"
	@echo "make test      everything: installs what it needs, lints, runs unit/integration/e2e tests"
	@echo "make test-long faults at every step of promotion and return, operator killed mid-way, AWX and molecule life cycles"
	@echo "make bench     benchmarks with ratios against their baselines"
	@echo "make bench-scale  the operator's cost per idle tenant (stand-in tenants on a real API server)"
	@echo "make bench-tenants  50 real control-plane-only virtual clusters at once on the sandbox (about 40 min)"
	@echo "make conformance  the upstream conformance suite on a virtual cluster and on the host (baseline)"
	@echo "make k8s       build (or reuse) the pinned Kubernetes binaries; prints their directory"
	@echo "make cilium    build (or reuse) the pinned Cilium agent, CNI plugin and operator; prints their directory"
	@echo "make runtime   build (or reuse) the machines' containerd and runc; prints their directory"
	@echo "make images    build (or reuse) OCI archives of the control-plane and pause images; prints their directory"
	@echo "make operator-image  build (or reuse) the operator's OCI archive (Python rootfs + collection); prints its path"
	@echo "make push-images REGISTRY=host[:port][/path] [REGISTRY_CERT_DIR=DIR]  every image, the operator's too, into your registry"
	@echo "make apiserver run a real etcd + kube-apiserver on loopback in the foreground (Ctrl-C stops it)"
	@echo "make down      remove the sandbox"

$(STAMP): requirements-dev.txt constraints.txt agent/pyproject.toml operator/pyproject.toml kubectl/pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q -r requirements-dev.txt -c constraints.txt
	$(PIP) install -q --no-deps -e agent -e operator -e kubectl
	@# the collection is this checkout: link it where ansible looks for installed collections
	site="$$($(PY) -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')" && \
	  mkdir -p "$$site/ansible_collections/kosmos" && ln -sfn "$(CURDIR)" "$$site/ansible_collections/kosmos/kubenest"
	rm -f $(VENV)/.installed-* && touch $@

install: system-deps $(STAMP)

system-deps:
	@bash .ci/system-deps.sh

ruff: install
	$(VENV)/bin/ruff check .

ansible-lint: install
	cd $(CURDIR) && PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/ansible-lint --profile production

sanity: install
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH bash .ci/sanity.sh

changelog-lint: install
	cd $(CURDIR) && PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/antsibull-changelog lint

lint: ruff ansible-lint sanity changelog-lint

# The diagrams README.md shows, from their Graphviz sources (a unit test fails when one is stale).
diagrams:
	@for source in docs/diagrams/*.dot; do dot -Tsvg "$$source" -o "$${source%.dot}.svg"; done

# Each role's README.md, from its meta/argument_specs.yml (a unit test fails when one is stale).
role-readmes: install
	$(VENV)/bin/python -m tests.support.role_readmes

unit: install
	$(PYTEST) tests/unit

# Two workers, each test file on one of them (files share a fixture's API server): the operator's tests mostly wait.
INTEGRATION := $(PYTEST) --durations=12 -n 2 --dist loadfile
integration: install k8s cilium
	$(INTEGRATION) tests/integration

# make test runs the tier in three parts: the agent's and the collection's node-side tests (no Kubernetes
# binary) while Kubernetes is built, then what needs only Kubernetes while the images are built, then the rest
# (tests/integration/conftest.py says which tests need images).
NO_K8S := tests/integration/agent tests/integration/collection
integration-agent: install
	$(INTEGRATION) -m "not images" $(NO_K8S)

integration-early: install k8s
	$(INTEGRATION) -m "not images" $(addprefix --ignore=,$(NO_K8S)) tests/integration

integration-images: install k8s cilium images
	$(INTEGRATION) -m images tests/integration

# The sandbox's builds come first: on a fresh machine they take longer than one test may. Two workers: the tests
# that share the default sandbox on one, the modules with machines of their own (node machines, the quick start,
# the kubeadm host) one after the other on the other.
e2e: install k8s images
	$(PYTEST) --durations=20 -n 2 --dist loadgroup tests/e2e

# The kubeadm host's tests on their own, whatever the commit's turn (make e2e runs them on their turn, beside the
# sandbox's; make test-long always).
e2e-kubeadm: install k8s images
	KUBENEST_LONG=1 $(PYTEST) --durations=10 tests/e2e/test_kubeadm_host.py

# .ci/test.sh: the tiers in order, the builds in the background (make prebuild, log in build/prebuild.log) while
# lint, unit and the first part of integration run, and a table of each tier's time at the end.
test:
	@bash .ci/test.sh

# What make test builds ahead, at low priority, in two chains side by side: Kubernetes (the integration tier
# waits for it), Cilium and the component images keep the CPU busy, while the machine images mostly wait on the
# network and the disk (debootstrap, pip); the machines' container runtime (containerd, runc) is built in
# between, as the node and bare images carry it. Each step is timed into the same table as the tiers.
TIER := python3 .ci/tiers.py run
prebuild: install
	@status=0; $(MAKE) --no-print-directory prebuild-machines & machines=$$!; \
	  $(MAKE) --no-print-directory prebuild-images || status=1; wait $$machines || status=1; exit $$status

prebuild-images: install
	$(TIER) build:k8s -- $(MAKE) --no-print-directory k8s
	$(TIER) build:cilium -- $(MAKE) --no-print-directory cilium
	$(TIER) build:images -- $(MAKE) --no-print-directory images

prebuild-machines: install
	$(TIER) build:operator-image -- $(PY) sandbox/images/operator_image.py
	$(TIER) build:runtime -- $(MAKE) --no-print-directory runtime
	$(TIER) build:node-image -- $(PY) -m sandbox.machines image
	$(TIER) build:bare-image -- $(PY) -m sandbox.machines bare-image

# Too long for CI: a fault at every step of promotion and return, the operator killed mid-way, the
# AWX and molecule life cycles that repeat what the VirtualCluster tests show, and upgrades from the previous
# Kubernetes minor (built here too: k8s-previous).
test-long: install k8s images k8s-previous
	KUBENEST_LONG=1 $(PYTEST) -m long tests/e2e

bench: install k8s images
	$(PY) bench/run.py
	$(PY) bench/api_tasks.py
	$(PY) bench/virtualclusters.py
	$(PY) bench/promotion.py
	$(PY) bench/addons.py
	$(PY) bench/operator_scale.py

# The operator's cost per idle tenant on its own (stand-in tenants on a real API server; no sandbox needed):
# KUBENEST_SCALE_TENANTS=1,100,1000 and KUBENEST_SCALE_WINDOW=120 by default.
bench-scale: install k8s
	$(PY) bench/operator_scale.py

# Many real control-plane-only virtual clusters at once on the sandbox (KUBENEST_BENCH_TENANTS=50, about 40 min).
bench-tenants: install k8s images
	$(PY) bench/many_tenants.py

k8s:
	@bash sandbox/k8s/build.sh

# The previous Kubernetes minor (versions.env), which a tenant can run and be upgraded from, and its images.
k8s-previous: install
	@bash sandbox/k8s/build.sh previous
	@$(PY) sandbox/images/build_images.py --release previous

cilium:
	@bash sandbox/cilium/build.sh

runtime:
	@bash sandbox/runtime/build.sh

images: install k8s cilium
	@$(PY) sandbox/images/build_images.py

operator-image: install
	@$(PY) sandbox/images/operator_image.py

# The images in a registry of your own (README, "Use it on your own cluster"); prints each reference written.
push-images: install k8s images
	@$(PY) -m sandbox.registry publish "$(REGISTRY)" $(if $(REGISTRY_CERT_DIR),--cert-dir "$(REGISTRY_CERT_DIR)")

apiserver: install k8s
	@$(PY) -m tests.support.apiserver

# The upstream conformance suite on the sandbox of make up: a VirtualCluster with two promoted workers and the host
# cluster as the baseline; reports in build/conformance/. CONFORMANCE_ARGS passes options (--smoke, --focus,
# --sides, --no-serial, --keep: python -m sandbox.conformance --help).
conformance: install k8s images
	$(PY) -m sandbox.conformance $(CONFORMANCE_ARGS)

# The suite and its images, built and cached without running anything (make test builds them beside its e2e tier,
# whose last test runs the smoke subset).
conformance-suite: install k8s images
	@bins="$$(bash sandbox/conformance/build.sh)" && \
	  $(PY) sandbox/conformance/images.py --bin-dir "$$(printf '%s\n' "$$bins" | tail -n 1)"

clean:
	rm -rf build tests/output bench/results

# --- node machines --------------------------------------------------------------------------------------------------
# systemd-nspawn machines on a private bridge, each running the agent (sandbox/machines). Settings come from the
# environment or the make command line: KUBENEST_WORKERS, KUBENEST_CONTROL_PLANES, KUBENEST_NODE_CIDR,
# KUBENEST_BRIDGE, KUBENEST_NODE_PREFIX, KUBENEST_SANDBOX_DIR. The inventory is .sandbox/inventory.yml.
.PHONY: nodes nodes-down nodes-status

nodes: install
	$(PY) -m sandbox.machines up

# Works without the venv too (teardown needs only the standard library).
nodes-down:
	@if [ -x $(PY) ]; then $(PY) -m sandbox.machines down; else python3 -m sandbox.machines down; fi

nodes-status:
	@$(PY) -m sandbox.machines status
