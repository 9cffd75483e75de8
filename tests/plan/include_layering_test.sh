#!/usr/bin/env bash
# The runtime's include layering (docs/runtime.md, issue 12): engine/ holds
# backend-neutral code only, so it includes no backend (cpu/backend, cpu/ops,
# cuda/); the CUDA backend includes no CPU backend code but the loaded
# weights, and no engine code but its neutral headers (backend.h, step.h,
# engine_options.h); runtime/ops/ and plan/ include no backend at all. Fails
# naming each offending include.
set -euo pipefail
RT="${1:?usage: include_layering_test.sh RUNTIME_DIR}"
status=0
check() { # check DIR PATTERN WHY
  local hits
  hits=$(grep -rnE "#include \"($2)" "$RT/$1" --include=*.h --include=*.cpp || true)
  if [[ -n "$hits" ]]; then
    echo "error: runtime/$1 must not include $3:" >&2
    echo "$hits" >&2
    status=1
  fi
}
check engine 'cpu/backend/|cpu/ops/|cuda/' "a backend (createBackend lives in runtime/backends/)"
check cuda 'engine/(engine|generate)\.h|cpu/ops/|cpu/backend/cpu_' "the engine or the CPU backend"
check ops 'cpu/|cuda/|engine/|plan/plan\.h' "a backend or the loader (ops/ is what they share)"
check plan 'cpu/|cuda/|engine/' "a backend or the engine"
check cpu 'cuda/' "the CUDA backend"
exit $status
