#!/usr/bin/env bash
# Install the project into the venv, surviving a flaky package registry.
#
# torch's CUDA wheels are several hundred MB each; a dropped connection
# used to fail `make setup` outright (CI, stop 17: nvidia_cublas stopped at
# 247.7 of 404.9 MB after pip's 5 default resume attempts). pip resumes a
# partial download from where it stopped, so we give it many more resume
# attempts, and run the whole install up to 4 times: each run reuses what the
# previous ones put into pip's cache.
set -euo pipefail
pip="$1"; shift
for attempt in 1 2 3 4; do
    if "$pip" install --quiet --retries 10 --timeout 120 --resume-retries 50 "$@"; then
        exit 0
    fi
    echo "pip install failed (attempt $attempt of 4); retrying in $((attempt * 15)) s" >&2
    sleep $((attempt * 15))
done
echo "pip install failed 4 times: the package registry is unreachable or dropping connections" >&2
exit 1
