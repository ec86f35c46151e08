#!/usr/bin/env bash
# Builds the peers' environments the benchmarks compare against, under bench/.venvs/:
#   keras_hub/   keras-hub 0.32 on TensorFlow 2.20 (it pins 2.20); safetensors to read Hugging Face weights
#   torch/       Hugging Face transformers + tokenizers on PyTorch 2.13 CPU; accelerate for its Trainer
# Usage: bash bench/setup_envs.sh   (idempotent; re-running only checks the installs)
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p .venvs
if [ ! -x .venvs/keras_hub/bin/python ]; then python3 -m venv .venvs/keras_hub; fi
.venvs/keras_hub/bin/pip install -q "tensorflow==2.20.*" "tensorflow-text==2.20.*" "keras-hub==0.32.*" "keras>=3.10" numpy safetensors
if [ ! -x .venvs/torch/bin/python ]; then python3 -m venv .venvs/torch; fi
# torch==2.13.0 is the CPU build this machine kind provides; a bare "torch" would pull CUDA wheels.
.venvs/torch/bin/pip install -q "torch==2.13.0" "transformers>=4.40" tokenizers safetensors numpy accelerate
echo "peer environments ready under bench/.venvs"
