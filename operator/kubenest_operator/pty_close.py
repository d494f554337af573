"""No pause when a finished run's pty is closed.

ptyprocess sleeps `delayafterclose` (0.1 s) after closing a pty, to give a child that is still exiting time to
be reaped before it checks whether the child lives. ansible-runner closes the pty once it has read EOF, when
ansible-playbook has already exited: the pause is paid by every run for nothing. A child still alive on close
(a canceled or timed-out run) is ended by ptyprocess's terminate() as before, which keeps its own pause.
"""

from __future__ import annotations

import functools

import ptyprocess

_MARK = "_kubenest_no_close_delay"


def install() -> None:
    """Make every PtyProcess created from now on close without the pause; calling it again changes nothing."""
    original = ptyprocess.PtyProcess.__init__
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.delayafterclose = 0

    setattr(__init__, _MARK, True)
    ptyprocess.PtyProcess.__init__ = __init__
