#!/usr/bin/env bash
# Makes (or reuses) the Python environment of the interoperability tests and the benches'
# PyTorch anchor: a venv in .python/ (git-ignored; HINDSIGHT_PYTHON_ENV names another folder)
# with the pinned versions of test/interop/requirements.txt. The app itself never needs Python.
#
# Reused as it is when its stamp matches the requirements file; remade otherwise. Prints one line
# saying which. Exit status 0 when the environment is ready, 1 (with one line) when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir="${HINDSIGHT_PYTHON_ENV:-.python}"
requirements="test/interop/requirements.txt"
stamp="$env_dir/.hindsight-requirements"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ -x "$env_dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "python-env: reusing $env_dir ($("$env_dir/bin/python" --version 2>&1))"
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "python-env: no python3 on this machine; the interoperability tests will be skipped" >&2
  exit 1
fi
rm -rf "$env_dir"
"$python" -m venv "$env_dir"
pip=("$env_dir/bin/python" -m pip install --quiet --disable-pip-version-check)
# PyTorch's CPU-only wheels (~200 MB) where their index is reachable; PyPI's CUDA build otherwise.
torch_pin=$(grep -E '^torch==' "$requirements")
if curl -fsS --max-time 10 -o /dev/null https://download.pytorch.org/whl/cpu/torch/ 2>/dev/null; then
  "${pip[@]}" --index-url https://download.pytorch.org/whl/cpu "$torch_pin" \
    || echo "python-env: the CPU-only torch wheel failed; taking PyPI's" >&2
fi
started=$SECONDS
"${pip[@]}" -r "$requirements"
echo "$want" > "$stamp"
echo "python-env: made $env_dir in $((SECONDS - started)) s ($("$env_dir/bin/python" -c 'import torch, transformers, peft, trl; print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, trl {trl.__version__}")'))"
