import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.pipelining import python_module_command


@pytest.mark.parametrize(("cmd", "expected"), [
    ("/bin/sh -c '/usr/bin/python3 && sleep 0'", ("/usr/bin/python3", {})),
    ("/bin/sh -c 'LANG=C.UTF-8 LC_ALL=C.UTF-8 /usr/bin/python3.11 && sleep 0'",
     ("/usr/bin/python3.11", {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})),
    ("/bin/bash -c '/opt/py/bin/python'", ("/opt/py/bin/python", {})),
])
def test_pipelined_module_commands_are_recognised(cmd, expected):
    assert python_module_command(cmd) == expected


@pytest.mark.parametrize("cmd", [
    "/bin/sh -c 'sudo -H -S -n -u bob /bin/sh -c \"echo BECOME; /usr/bin/python3\" && sleep 0'",
    "/bin/sh -c 'python3 && sleep 0'",  # not absolute: the shell's PATH lookup decides
    "/bin/sh -c 'X=$HOME /usr/bin/python3'",  # expansion needs the shell
    "/bin/sh -c '/usr/bin/python3 /tmp/module.py'",
    "/bin/sh -c 'echo hi'",
    "/usr/bin/python3",
    "/bin/sh -c 'unterminated",
])
def test_anything_else_is_left_to_the_shell(cmd):
    assert python_module_command(cmd) is None
