#!/usr/bin/env bash
# ansible-test sanity on the collection as it ships: built, installed into a scratch
# ansible_collections/gpushare/gpu_sharing (ansible-test runs from there; findings it keeps are in
# tests/sanity/ignore-2.19.txt, each with its reason), each test in ansible-test's own venv.
#
# Not run:
#   ansible-doc, import  their venvs lack the gpushare package the plugins import;
#                        tests/integration/test_collection.py runs ansible-doc on every plugin of the
#                        installed collection with the package installed, and every runbook run imports them
#   pep8, pylint         ruff lints the Python (pyproject.toml); pylint over the shipped package takes
#                        minutes on 2 CPUs
#   changelog            no changelogs/ fragments (CHANGELOG.md)
#   pslint, shellcheck   no PowerShell; the one shell script is this one
#
# ansible-test bootstraps pip in each venv with get-pip.py from ci-files.testing.ansible.com, which
# these machines cannot reach (only the package registries): its cache gets a stand-in that runs pip
# from pip's own wheel, downloaded from PyPI.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$repo/.venv/bin
# Outside the checkout: inside a git work tree ansible-test would test only the files git tracks there.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
pip_version=24.2  # ansible-test's (ansible_test/_internal/python_requirements.py)
cache=$HOME/.ansible/test/cache

mkdir -p "$cache"
if [ ! -f "$cache/pip-$pip_version-py3-none-any.whl" ]; then
    "$bin/pip" download --quiet --no-deps "pip==$pip_version" -d "$cache"
fi
cat > "$cache/get_pip_${pip_version//./_}.py" <<PY
"""Stand-in for get-pip.py $pip_version (scripts/sanity.sh): pip, run from its wheel, installs itself and what ansible-test asks."""
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "pip-$pip_version-py3-none-any.whl"))
sys.argv = ["pip", "install", "--find-links", here, *[a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
PY

"$bin/ansible-galaxy" collection build "$repo" --output-path "$scratch/dist" >/dev/null
ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false "$bin/ansible-galaxy" collection install "$scratch"/dist/*.tar.gz \
    -p "$scratch" --no-deps >/dev/null 2>&1
cd "$scratch/ansible_collections/gpushare/gpu_sharing"
"$bin/ansible-test" sanity --local --python 3.11 --color no \
    --skip-test ansible-doc --skip-test import --skip-test pep8 --skip-test pylint --skip-test changelog \
    --skip-test pslint --skip-test shellcheck
