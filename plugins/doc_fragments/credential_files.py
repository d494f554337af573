# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # Shared by the modules that write credentials (certificates, keys, kubeconfigs).
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Reports what would change without writing anything.
  diff_mode:
    support: none
    description: Credentials are never shown as a diff.
"""

    # Modules that generate private keys.
    KEYS = r"""
options:
  key_type:
    description: Key algorithm of a new key.
    type: str
    choices: [rsa, ec]
    default: rsa
requirements:
  - cryptography >= 3.3
"""
