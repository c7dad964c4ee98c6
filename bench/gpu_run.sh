#!/usr/bin/env bash
# bench/gpu.py on a lent GPU machine (kind nvidia-h200: no network; python3 is 3.12 with numpy 2.5.2, onnx,
# nvidia-ml-py, CUDA 13 libraries as pip's nvidia-* packages, and onnxruntime 1.30.0: the CPU package, by its
# name). A session with a device runs, through its `run` tool:
#     run(command="bash bench/gpu_run.sh", carry=[".whl"], timeout_s=540)   # defaults: a few minutes expected
# then pastes $OUT/benchmarks.md under "GPU" in docs/BENCHMARKS.md and $OUT/precision.md into docs/PRECISION.md.
# results.json is rewritten after every measurement, so a run cut short still returns what it measured.
#
# Beforehand, here, from the repo root (.whl/ is already in .gitignore; do not commit it):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
#     pypinyin==0.55.0 lunar-python==1.4.8 opencc==1.4.2 cachetools==8.0.2 pydantic==2.13.4 \
#     pydantic-core==2.46.4 pydantic-settings==2.14.1 python-dotenv==1.2.2 annotated-types==0.7.0 \
#     typing-inspection==0.4.2
#   python3 bench/gpu.py --save-dev .whl/dev      # the dev split (~0.3 MB): ../shared does not travel
# Those are chunlian's runtime needs that the image lacks (KINDS.md's package list), at the versions installed on
# the development machine, which work together; about 7 MB. Not needed: numpy and nvidia-ml-py (in the image: a
# second numpy would only shadow it), sacrebleu, prometheus-client, pillow (in the image), fastapi and uvicorn
# (the HTTP server only). The tracked tree is ~50 MB (the weights) of the 64 MiB a run may carry.
#
# onnxruntime-gpu, the one wheel that matters, does NOT fit, as of 2026-11-30:
#   - onnxruntime here is 1.32.0; PyPI has no onnxruntime-gpu 1.32 (newest 1.31.1), so it would be 1.31.1, whose
#     cp312 manylinux_2_28_x86_64 wheel is 243.7 MiB: far over the 64 MiB a run carries, tree included.
#   - PyPI's x86_64 onnxruntime-gpu has been ONNX Runtime's CUDA 12 build, by its issue threads (not checked for
#     1.31.1; its CUDA 13 builds are on the project's own package feed, which neither machine may use). The
#     image's libraries are CUDA 13, so a CUDA 12 build's provider would not load there (no libcublas.so.12).
#     A wheel that turns up later says which CUDA it wants:
#       unzip -p .whl/onnxruntime_gpu-*.whl '*/METADATA' | grep ^Requires-Dist   (cu12 or cu13 in the extras)
# Until a CUDA 13 onnxruntime-gpu under that limit can be had (or the image brings one), this script stops at
# gpu.py's provider check with results.json's "error" (device time: the machine's start and a few seconds). A
# cheaper first look than the whole run, still one machine start:
#     run(command="python3 -c 'import onnxruntime as o; print(o.__version__, o.get_available_providers())'")
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
# a CUDA 13 onnxruntime-gpu finds cuBLAS, cuDNN and the runtime among the image's nvidia-* packages
NV=$(python3 -c 'import glob, nvidia, os; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/**/lib/*.so*", recursive=True)})))' 2>/dev/null)
export LD_LIBRARY_PATH=${NV}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
python3 -c 'import onnxruntime as o; print("onnxruntime", o.__version__, o.__file__, o.get_available_providers())'
DATA=../shared/data
[ -d .whl/dev ] && DATA=.whl/dev
python3 bench/gpu.py --provider cuda --data "$DATA" --out "${OUT:?set OUT to the output folder}" 2>&1 | tee "$OUT/log.txt"
