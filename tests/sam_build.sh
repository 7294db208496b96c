#!/usr/bin/env bash
# The deployed build: `sam build` of infra/template.yaml as written (arm64, the default, with
# samconfig.toml, the release profile: fat LTO, opt-level 3), its bootstraps checked to be arm64
# ELF, and infra/local/stage.py (which lays out the functions `sam local` runs in the tests)
# checked to make the very template and layout `sam build` makes.
#
# `sam build` runs `cargo lambda build --release --arm64 --bin NAME` once per function, one after
# the other, each linking with one core. The same command is run first for all the functions at
# once, so the dependencies are compiled once and two functions link at a time; `sam build`'s own
# runs then find them built (same command, features and target dir) and only copy them.
# Installs the SAM tools (.venv-sam) and the aarch64 Rust target if missing.
# Usage: tests/sam_build.sh   (from tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source infra/local/venv.sh
rustup target list --installed | grep -q aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu

packages=()
for binary in $(sed -n 's/^ *Binary: *//p' infra/template.yaml); do packages+=(-p "$binary"); done
cargo lambda build --release --arm64 "${packages[@]}"

sam build
for bootstrap in .aws-sam/build/*/bootstrap; do
  python3 -c "import sys; b = open(sys.argv[1], 'rb').read(20); sys.exit(0 if b[:4] == b'\\x7fELF' and int.from_bytes(b[18:20], 'little') == 183 else 1)" \
    "$bootstrap" || { echo "sam build did not make an arm64 binary: $bootstrap"; exit 1; }
done

staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
python infra/local/stage.py infra/template.yaml "target/lambda/{binary}/bootstrap" "$staged"
cmp .aws-sam/build/template.yaml "$staged/template.yaml" \
  || { echo "infra/local/stage.py wrote another template than sam build"; exit 1; }
diff <(cd .aws-sam/build && find . | sort) <(cd "$staged" && find . | sort) \
  || { echo "infra/local/stage.py laid out other files than sam build"; exit 1; }
for bootstrap in .aws-sam/build/*/bootstrap; do
  cmp "$bootstrap" "$staged/${bootstrap#.aws-sam/build/}" || { echo "staged another binary: $bootstrap"; exit 1; }
done
echo "sam build: $(ls -d .aws-sam/build/*/ | wc -l) arm64 functions; stage.py makes the same template and layout"
