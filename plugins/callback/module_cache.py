# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: module_cache
type: aggregate
short_description: Keep built module payloads from one run to the next
version_added: 1.3.0
description:
  - ansible-core builds each module's payload (the module zipped with the module_utils it imports) the first time a
    run uses it and throws it away when the run ends. With this callback enabled, payloads are kept in
    O(cache_dir), so a run's first task with a module no longer pays for the build (about 0.25 s per distinct
    module on a 2-core machine; a promotion uses seven on the node).
  - Payloads are kept under a key made of ansible-core's version, the release manifest of every installed
    collection on the search path, and the path, size and modification time of every module and module_utils file
    of ansible-core and of checked-out collections (those without a release manifest), so a module that changes is
    built again, never served from an older payload. The three most recently used other keys are kept.
  - Payloads are pickles that ansible-core loads. O(cache_dir) must belong to the user running Ansible and be
    writable by nobody else, or the callback warns and the run builds payloads as usual.
  - The kosmos.kubenest operator enables it for its runs.
author:
  - kosmos.kubenest maintainers (@kosmos-kubenest)
requirements:
  - enable in the C(callbacks_enabled) setting (C(ANSIBLE_CALLBACKS_ENABLED=kosmos.kubenest.module_cache))
options:
  cache_dir:
    description: Where payloads are kept.
    type: path
    default: ~/.cache/kubenest/ansible-modules
    env:
      - name: KUBENEST_MODULE_CACHE_DIR
    ini:
      - section: callback_module_cache
        key: cache_dir
"""

import os

from ansible import constants as C
from ansible import release
from ansible.plugins.callback import CallbackBase
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import module_cache


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kosmos.kubenest.module_cache"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        # Before any task: worker processes read ansible-core's payload directory from the run's local tmp.
        run_tmp = getattr(C, "DEFAULT_LOCAL_TMP", None)
        if not run_tmp or not os.path.isdir(run_tmp):
            return
        try:
            key = module_cache.cache_key(release.__version__, os.path.dirname(release.__file__),
                                         list(AnsibleCollectionConfig.collection_paths))
            entry = module_cache.prepare(os.path.expanduser(self.get_option("cache_dir")), key)
            module_cache.attach(run_tmp, entry)
        except (OSError, module_cache.UnsafeCacheDir) as exc:
            self._display.warning(f"kosmos.kubenest.module_cache: module payloads are built for this run only: {exc}")
