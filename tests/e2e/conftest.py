"""End-to-end tests: real machines, real agents, real ansible-playbook."""


def pytest_configure(config):
    config.addinivalue_line("markers", "machines: boots systemd-nspawn node machines (root, debootstrap, minutes)")


def pytest_terminal_summary(terminalreporter):
    from .test_machines import timings

    for name, value in timings.items():
        terminalreporter.write_line(f"machines: {name}: {value}")
