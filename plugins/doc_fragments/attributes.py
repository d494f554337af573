# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Modules and actions that only read.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Only reads; the same result in check mode.
  diff_mode:
    support: none
    description: Nothing changes.
"""

    # Actions: they run on the controller (combine with READ_ONLY for one that only reads).
    ACTION = r"""
attributes:
  action:
    support: full
    description: Runs on the controller.
"""
