# What scripts/gpu-check's modes share (sourced, never run): the log, time-boxed steps, the device
# as nvidia-smi sees it, ctest's JUnit counted, and the empty_cache() scenario's figures.
# The caller sets: budget (seconds for the whole run), started (date +%s at the start), log.
# shellcheck shell=bash disable=SC2154

declare -A step_status step_seconds

note() { printf '%s\n' "$*" | tee -a "$log"; }

# run_step NAME LIMIT_SECONDS COMMAND...: runs COMMAND with its output in the log, bounded by
# LIMIT and by what is left of the budget; records ok / failed (exit N) / timed out / skipped.
# A command that exits 77 skipped itself; its reason is the last line it printed.
run_step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - ($(date +%s) - started) - 5))
  ((limit > left)) && limit=$left
  if ((limit <= 0)); then
    step_status[$name]="skipped: no time left in the ${budget}s budget"
    return 1
  fi
  note "=== $name (limit ${limit}s): $*"
  local t0 rc mark
  t0=$(date +%s)
  mark=$(wc -l <"$log")
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  step_seconds[$name]=$(($(date +%s) - t0))
  case $rc in
    0) step_status[$name]="ok" ;;
    77) step_status[$name]="SKIPPED: $(skip_reason "$mark")" ;;
    124 | 137) step_status[$name]="timed out after ${limit}s" ;;
    *) step_status[$name]="failed (exit $rc)" ;;
  esac
  note "=== $name: ${step_status[$name]} in ${step_seconds[$name]}s"
  return $rc
}

# Why a step that exited 77 skipped, from what it logged after line MARK: pytest's first
# "SKIPPED [n] file:line: reason" (-rs), else a "no GPU: ..." line, else its last line.
skip_reason() {
  local output
  output=$(tail -n +"$(($1 + 1))" "$log")
  local reason
  reason=$(grep -m1 -o -E 'SKIPPED \[[0-9]+\] [^ ]+: .*' <<<"$output" | sed -E 's/^SKIPPED \[[0-9]+\] [^ ]+: //')
  [[ -n $reason ]] || reason=$(grep -m1 -o 'no GPU: .*' <<<"$output")
  [[ -n $reason ]] || reason=$(grep -v '^\s*$' <<<"$output" | tail -n 1)
  printf '%s' "${reason:0:200}"
}

# Sets `device` and `driver` from nvidia-smi (informative; never fails the check).
query_device() {
  device="unknown (nvidia-smi not found)"
  driver="unknown"
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  # The tests use CUDA device 0: the first entry of CUDA_VISIBLE_DEVICES when it is set.
  local first=${CUDA_VISIBLE_DEVICES:-0} cuda
  first=${first%%,*}
  local smi=(timeout 20 nvidia-smi)
  [[ -n $first && $first != MIG-* ]] && smi+=(-i "$first")
  timeout 20 nvidia-smi >>"$log" 2>&1
  device=$("${smi[@]}" --query-gpu=index,name,uuid,memory.total --format=csv,noheader 2>/dev/null |
    head -n 1)
  cuda=$(timeout 20 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1)
  driver="$("${smi[@]}" --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  device=${device:-unknown (nvidia-smi answered nothing)}
  driver="${driver:-unknown}${cuda:+ ($cuda)}"
  note "device: $device; driver: $driver"
}

# Prints "<p> passed, <f> failed, <s> skipped (of <n>)" for a ctest JUnit file, and on a second
# line the first skip reason (empty when none was skipped).
count_junit() {
  python3 - "$1" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
n = passed = failed = skipped = 0
reason = ""
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    n += 1
    status = case.get("status", "")
    if case.find("failure") is not None or case.find("error") is not None or status == "fail":
        failed += 1
    elif case.find("skipped") is not None or status in ("notrun", "disabled"):
        skipped += 1
        if not reason:
            out = "".join(case.find(tag).text or "" for tag in ("system-out",) if case.find(tag) is not None)
            found = re.search(r"Skipped\s*\n?(.*)", out) or re.search(r"SKIPPED \](.*)", out)
            reason = " ".join(found.group(1).split())[:160] if found else ""
    else:
        passed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped (of {n})")
print(reason)
EOF
}

# Sets `empty_cache` and `nvml_vs_reserved` from the empty_cache GPU test's results file.
describe_empty_cache() {
  empty_cache="not measured (the test did not run or was skipped; see log)"
  nvml_vs_reserved="not measured"
  [[ -f $1 ]] && command -v python3 >/dev/null 2>&1 || return 0
  local lines
  mapfile -t lines < <(python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
mib = lambda b: f"{b / 1048576:.2f} MiB"
ok = lambda good: "ok" if good else "MISMATCH"
tol = r["tolerance"]
print(f"{r['source']}: {mib(r['before'])} before, {mib(r['after_big'])} with 1.5 GiB, "
      f"{mib(r['after_small'])} with the small buffer, {mib(r['after_empty_cache'])} after "
      f"empty_cache(); released {mib(r['released_by_empty_cache'])}, NVML fell "
      f"{mib(r['nvml_drop'])} ({ok(abs(r['nvml_drop'] - r['released_by_empty_cache']) <= tol)}, "
      f"±{mib(tol)})")
print(f"NVML shows {mib(r['nvml_held_beyond_baseline'])} beyond the baseline; allocator reserved "
      f"{mib(r['allocator_reserved'])} "
      f"({ok(abs(r['nvml_held_beyond_baseline'] - r['allocator_reserved']) <= tol)})")
EOF
  )
  empty_cache=${lines[0]:-$empty_cache}
  nvml_vs_reserved=${lines[1]:-$nvml_vs_reserved}
}

# The summary's line for a step: its status and, when it ran, its seconds.
step() { printf '%s%s' "${step_status[$1]:-not run}" "${step_seconds[$1]:+ (${step_seconds[$1]}s)}"; }
