#!/usr/bin/env bash
# ansible-test needs the collection under ansible_collections/<ns>/<name>: copy the tracked files there.
set -euo pipefail
cd "$(dirname "$0")/.."
# ansible-test bootstraps pip in its venvs with a script it downloads; provide it locally.
pip_version="$(python -c 'from ansible_test._internal.python_requirements import PIP_VERSION as v; print(v)' 2>/dev/null || echo 24.2)"
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
sed "s|@PIP_CERT@|${PIP_CERT:-${REQUESTS_CA_BUNDLE:-}}|" .ci/get_pip_shim.py > "$cache"
root="build/sanity/ansible_collections/kosmos/kubenest"
rm -rf build/sanity && mkdir -p "$root"
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$root" 2>/dev/null || true
cd "$root"
# ansible-test uses git to list files when it finds a repository; make the copy one.
git init -q && git add -A && git -c user.email=ci@kubenest.invalid -c user.name=ci commit -qm sanity
python_version="$(python -c 'import sys;print("%d.%d" % sys.version_info[:2])')"
ansible-test sanity --python "$python_version" --color no "$@"
