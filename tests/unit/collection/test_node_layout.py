"""A node's layout as node promotion judges it: what the sandbox and a kubeadm node run, and why one is refused."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils.node_layout import (
    assess,
    cni_plugin_types,
    environment_files,
    is_cleared,
    parse_flags,
    parse_show,
)

CLEARED = ["/etc/kubernetes", "/var/lib/kubelet", "/var/lib/cni", "/etc/cni/net.d/*",
           "/etc/systemd/system/kubelet.service", "/etc/systemd/system/kubelet.service.d",
           "/etc/systemd/system/kube-proxy.service"]

# What `systemctl show` prints on a node the collection bootstrapped (roles/kubelet).
SANDBOX_KUBELET = """LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/etc/systemd/system/kubelet.service
DropInPaths=
MainPID=812
EnvironmentFiles=
"""
SANDBOX_KUBELET_ARGV = ["/usr/local/bin/kubelet", "--config=/var/lib/kubelet/config.yaml",
                        "--kubeconfig=/etc/kubernetes/kubelet.conf",
                        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                        "--cert-dir=/var/lib/kubelet/pki", "--node-ip=198.18.0.12", "--hostname-override=w1"]
SANDBOX_PROXY = SANDBOX_KUBELET.replace("kubelet.service", "kube-proxy.service").replace("812", "640")
SANDBOX_PROXY_ARGV = ["/usr/local/bin/kube-proxy", "--config=/etc/kubernetes/kube-proxy-config.yaml"]

# A node set up by kubeadm's packages and `kubeadm join`: the unit in /usr/lib, kubeadm's drop-in and flags file,
# kube-proxy a DaemonSet (no unit).
KUBEADM_KUBELET = """LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/usr/lib/systemd/system/kubelet.service
DropInPaths=/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf
MainPID=977
EnvironmentFiles=/var/lib/kubelet/kubeadm-flags.env (ignore_errors=yes)
EnvironmentFiles=/etc/default/kubelet (ignore_errors=yes)
"""
KUBEADM_KUBELET_ARGV = ["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                        "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml",
                        "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
                        "--pod-infra-container-image=kubenest.local/pause:3.10.2"]
NO_UNIT = "LoadState=not-found\nActiveState=inactive\nSubState=dead\nFragmentPath=\nMainPID=0\n"


def test_a_node_the_collection_bootstrapped_is_one_promotion_handles():
    layout, problems = assess(parse_show(SANDBOX_KUBELET), SANDBOX_KUBELET_ARGV, parse_show(SANDBOX_PROXY),
                              SANDBOX_PROXY_ARGV, ["10-kubenest.conflist"], CLEARED)
    assert problems == []
    kubelet = layout["kubelet"]
    assert kubelet["fragment"] == "/etc/systemd/system/kubelet.service" and kubelet["drop_ins"] == []
    assert kubelet["flags"] == {"config": "/var/lib/kubelet/config.yaml", "kubeconfig": "/etc/kubernetes/kubelet.conf",
                                "bootstrap-kubeconfig": "/etc/kubernetes/bootstrap-kubelet.conf",
                                "cert-dir": "/var/lib/kubelet/pki"}
    assert layout["kube_proxy"]["flags"] == {"config": "/etc/kubernetes/kube-proxy-config.yaml"}
    assert layout["cni_files"] == ["10-kubenest.conflist"]
    assert layout["keep"] == ["/etc/cni/net.d/10-kubenest.conflist", "/var/lib/kubelet/config.yaml"]
    assert kubelet["masks"] == []


def test_a_kubeadm_node_is_promoted_with_its_drop_in_masked_and_its_flag_file_and_cni_kept():
    layout, problems = assess(parse_show(KUBEADM_KUBELET), KUBEADM_KUBELET_ARGV, parse_show(NO_UNIT), [],
                              ["10-bridge.conflist"], CLEARED)
    assert problems == []
    assert layout["kube_proxy"] is None  # a DaemonSet: nothing of it on the node to keep
    kubelet = layout["kubelet"]
    assert kubelet["environment_files"] == ["/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"]
    assert kubelet["masks"] == ["/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    # /etc/default/kubelet and the drop-in in /usr/lib are not cleared: they stay where they are
    assert layout["keep"] == ["/etc/cni/net.d/10-bridge.conflist", "/var/lib/kubelet/config.yaml",
                              "/var/lib/kubelet/kubeadm-flags.env"]


def test_a_drop_in_of_the_admin_is_masked_and_kept_as_a_reset_clears_it():
    admin = KUBEADM_KUBELET.replace(
        "DropInPaths=/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "DropInPaths=/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf "
        "/etc/systemd/system/kubelet.service.d/20-site.conf")
    layout, problems = assess(parse_show(admin), KUBEADM_KUBELET_ARGV, parse_show(NO_UNIT), [], [], CLEARED)
    assert problems == []
    assert layout["kubelet"]["masks"] == ["/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
                                          "/etc/systemd/system/kubelet.service.d/20-site.conf"]
    assert "/etc/systemd/system/kubelet.service.d/20-site.conf" in layout["keep"]


def test_drop_ins_are_refused_where_a_reset_would_not_clear_their_masks():
    cleared = [p for p in CLEARED if not p.endswith(".service.d")]
    _layout, problems = assess(parse_show(KUBEADM_KUBELET), KUBEADM_KUBELET_ARGV, parse_show(NO_UNIT), [], [],
                               cleared)
    assert problems == [
        "kubelet.service has drop-ins (/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf), but a reset does "
        "not clear /etc/systemd/system/kubelet.service.d, where promotion masks them for the tenant's kubelet"]


def test_a_kubelet_without_a_bootstrap_kubeconfig_is_refused_as_it_could_not_come_back():
    argv = [a for a in SANDBOX_KUBELET_ARGV if not a.startswith("--bootstrap-kubeconfig")]
    _layout, problems = assess(parse_show(SANDBOX_KUBELET), argv, parse_show(SANDBOX_PROXY), SANDBOX_PROXY_ARGV, [],
                               CLEARED)
    assert problems == ["the kubelet runs without --bootstrap-kubeconfig: a returned node could not bootstrap its "
                        "host credentials"]


def test_a_kubelet_that_does_not_run_under_systemd_is_refused():
    _layout, problems = assess(parse_show(NO_UNIT), [], parse_show(NO_UNIT), [], [], CLEARED)
    assert problems == ["no systemd unit kubelet.service is loaded: the kubelet is not run by systemd under that name"]


def test_a_stopped_kubelet_is_refused_with_its_state():
    stopped = SANDBOX_KUBELET.replace("ActiveState=active", "ActiveState=failed")
    stopped = stopped.replace("SubState=running", "SubState=failed")
    _layout, problems = assess(parse_show(stopped.replace("MainPID=812", "MainPID=0")), [], parse_show(NO_UNIT),
                               [], [], CLEARED)
    assert len(problems) == 1 and "kubelet.service is failed/failed, not running" in problems[0]


def test_a_credential_outside_the_cleared_paths_is_refused_as_it_would_stay_on_the_node():
    argv = [a.replace("/etc/kubernetes/kubelet.conf", "/opt/site/kubelet.conf") for a in SANDBOX_KUBELET_ARGV]
    proxy = ["/usr/local/bin/kube-proxy", "--config", "/srv/kube-proxy.yaml"]
    _layout, problems = assess(parse_show(SANDBOX_KUBELET), argv, parse_show(SANDBOX_PROXY), proxy, [], CLEARED)
    assert problems == [
        "the kubelet's --kubeconfig=/opt/site/kubelet.conf lies outside the paths a reset clears "
        "(node_promote_cluster_paths): what it holds would stay on the node in the tenant's hands",
        "the kube-proxy's --config=/srv/kube-proxy.yaml lies outside the paths a reset clears "
        "(node_promote_cluster_paths): what it holds would stay on the node in the tenant's hands"]


def test_a_kubelet_without_a_config_file_or_kubeconfig_is_refused():
    _layout, problems = assess(parse_show(SANDBOX_KUBELET), ["/usr/local/bin/kubelet", "--v=2"],
                               parse_show(NO_UNIT), [], [], CLEARED)
    assert problems == ["the kubelet runs without --config", "the kubelet runs without --kubeconfig",
                        "the kubelet runs without --bootstrap-kubeconfig: a returned node could not bootstrap its "
                        "host credentials"]


def test_a_unit_running_something_else_is_refused():
    _layout, problems = assess(parse_show(SANDBOX_KUBELET), ["/usr/bin/sleep", "infinity"], parse_show(NO_UNIT), [],
                               [], CLEARED)
    assert problems == ["kubelet.service runs '/usr/bin/sleep' (pid 812), not a kubelet"]


def test_flags_are_read_in_both_forms_and_the_last_one_given_counts():
    argv = ["kubelet", "--config", "/a", "--kubeconfig=/b", "--config=/c", "-v", "2", "--unrelated=/x", "--cert-dir"]
    assert parse_flags(argv, ("config", "kubeconfig", "cert-dir")) == {"config": "/c", "kubeconfig": "/b"}


def test_cleared_paths_cover_files_under_directories_and_the_contents_of_a_star_entry():
    assert is_cleared("/etc/kubernetes/pki/ca.crt", CLEARED)
    assert is_cleared("/var/lib/kubelet", CLEARED)
    assert is_cleared("/etc/cni/net.d/10-bridge.conflist", CLEARED)
    assert not is_cleared("/etc/cni/net.d", CLEARED)  # the directory itself stays
    assert not is_cleared("/etc/kubernetes-site/kubelet.conf", CLEARED)
    assert not is_cleared("/var/lib/kubelet/../../../opt/x", CLEARED)


def test_environment_files_lose_their_ignore_errors_suffix():
    assert environment_files("/a b/env (ignore_errors=no)\n/c (ignore_errors=yes)") == ["/a b/env", "/c"]
    assert environment_files("") == []


def test_a_pod_network_agents_cni_configuration_is_not_kept_as_the_reset_removes_its_program_too():
    """Cilium's agent writes 05-cilium.conflist and installs cilium-cni (both cleared): put back before the agent
    runs again, the configuration would name a program that is not there. The bridge plugin's stays."""
    cleared = CLEARED + ["/usr/lib/cni/cilium-cni"]
    cilium = '{"cniVersion": "0.3.1", "name": "cilium", "plugins": [{"type": "cilium-cni", "enable-debug": false}]}'
    bridge = '{"cniVersion": "1.0.0", "name": "k", "plugins": [{"type": "bridge"}, {"type": "portmap"}]}'
    types = {"05-cilium.conflist": cni_plugin_types(cilium), "10-bridge.conflist": cni_plugin_types(bridge),
             "99-odd.conf": cni_plugin_types("not json")}
    assert types == {"05-cilium.conflist": ["cilium-cni"], "10-bridge.conflist": ["bridge", "portmap"],
                     "99-odd.conf": None}
    layout, _problems = assess(parse_show(KUBEADM_KUBELET), KUBEADM_KUBELET_ARGV, parse_show(NO_UNIT), [],
                               sorted(types), cleared, cni_types=types)
    assert [p for p in layout["keep"] if p.startswith("/etc/cni/")] == ["/etc/cni/net.d/10-bridge.conflist",
                                                                        "/etc/cni/net.d/99-odd.conf"]
    assert cni_plugin_types('{"type": "calico"}') == ["calico"]
