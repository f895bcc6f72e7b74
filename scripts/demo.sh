#!/usr/bin/env bash
# The README's demo: on a fresh Debian 12 machine (as root) it installs what is missing, builds
# engramctl, assembles the bundled trained MoE+Engram model (assets/demo-model) with the real
# DeepSeek-V3 tokenizer, exports the model's learned Engram rows into a v3 table whose owners come
# from the Brown corpus, verifies the table against the deployment config, inspects it, looks
# n-grams up, teaches the model a fact by fitting table rows (append --fit), folds it, and
# ends by running a prompt on the model.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/fetch_assets.sh
./scripts/build.sh
./scripts/demo_steps.sh
