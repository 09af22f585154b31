#!/usr/bin/env bash
# One device call after a refactor of the engine: the new build must give the same bits as the
# previous revision, both run in the same call on the same GPU.
#
# Binaries in .device/ (stripped; see scripts/engine/README.md):
#   gapscope-engine, engine-gpu-tests            the build under test
#   gapscope-engine-base, engine-gpu-tests-base  the previous revision
#   gapscope-calibrate-base                      optional: the previous calibration binary
# STEPS picks what runs (default: all, in this order):
#   selftest  every kernel and whole-model logits vs the CPU reference, both builds, one seed
#   gputests  the ignored GPU tests, both builds
#   levers    greedy md5 over every lever setting, both builds; the (model, npl, threshold) ->
#             md5 tables must be equal
#   logits    tiny HF models (scripts/engine/hf-tiny-models.py): teacher-forced logits of both
#             builds, engine and hf-bf16 numerics, CUDA and CPU; the f32 files must be equal
#   calibrate the hardware profile from both builds (compared on the host: same keys)
# Results go to $OUT; the last lines printed are the verdict table. Exit 0 only when every
# comparison is equal and every check passes.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
D=.device
STEPS=${STEPS:-selftest,gputests,levers,logits,calibrate}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
log="$OUT/same-bits.log"
say() { echo "$@" | tee -a "$log"; }
verdict=()
fail=0
record() { # name, ok(0/1), detail
  verdict+=("$(printf '%-34s %-5s %s' "$1" "$([ "$2" = 0 ] && echo same || echo DIFF)" "$3")")
  [ "$2" = 0 ] || fail=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"

if has selftest; then
  seed=$(date +%s%N)
  for tag in new base; do
    bin=$D/gapscope-engine$([ $tag = base ] && echo -base)
    $bin selftest --seed "$seed" --json "$OUT/selftest-$tag.json" > "$OUT/selftest-$tag.txt" 2>&1
    rc=$?
    say "selftest $tag rc=$rc: $(tail -n 1 "$OUT/selftest-$tag.txt")"
    record "selftest $tag (seed $seed)" $rc "$(tail -n 1 "$OUT/selftest-$tag.txt")"
  done
fi
if has gputests; then
  for tag in new base; do
    bin=$D/engine-gpu-tests$([ $tag = base ] && echo -base)
    $bin --ignored --test-threads 1 > "$OUT/gputests-$tag.txt" 2>&1
    rc=$?
    say "gpu tests $tag rc=$rc: $(grep 'test result' "$OUT/gputests-$tag.txt")"
    record "gpu tests $tag" $rc "$(grep -o '[0-9]* passed; [0-9]* failed' "$OUT/gputests-$tag.txt")"
  done
fi
if has levers; then
  for spec in "llama-3.2-1b.json bf16 4,8,16" "qwen3-0.6b.json bf16 4,8,16" \
              "llama-3.2-1b.json q8_0 0,4,8,16,256" "qwen3-0.6b.json q4_0 0,4,8,16,256"; do
    set -- $spec
    for tag in new base; do
      bin=$D/gapscope-engine$([ $tag = base ] && echo -base)
      $bin levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16 --thresholds "$3" \
        --json "$OUT/levers-$tag-${1%.json}-$2.json" > "$OUT/levers-$tag-${1%.json}-$2.txt" 2>&1
      say "levers $tag $1 $2 rc=$?"
    done
    python3 - "$OUT/levers-new-${1%.json}-$2.json" "$OUT/levers-base-${1%.json}-$2.json" > "$OUT/cmp.txt" <<'EOF'
import json, sys
def table(path):
    d = json.load(open(path))
    def flat(r, pre=""):
        out = {}
        for k, v in r.items():
            if isinstance(v, dict):
                out.update(flat(v, k + "."))
            else:
                out[k.split(".")[-1]] = v
        return out
    rows = [flat(r) for r in d["results"]]
    return d.get("identical"), sorted({(r["npl"], r["mmvq_max_batch"], r["md5"]) for r in rows}), len(rows)
a, b = table(sys.argv[1]), table(sys.argv[2])
same = a[1] == b[1] and a[0] == b[0]
print(f"{'same' if same else 'DIFF'} identical new={a[0]} base={b[0]} cases new={a[2]} base={b[2]} md5s={len(a[1])}")
sys.exit(0 if same else 1)
EOF
    rc=$?
    say "  compare: $(cat "$OUT/cmp.txt")"
    record "levers ${1%.json} $2" $rc "$(cat "$OUT/cmp.txt")"
  done
fi
if has logits; then
  T=$(mktemp -d)
  python3 scripts/engine/hf-tiny-models.py --out "$T" --seed 0 > "$OUT/hf_tiny.log" 2>&1
  say "hf-tiny-models.py rc=$?"
  for m in tiny-llama tiny-qwen3 tiny-qwen2; do
    [ -d "$T/$m" ] || continue
    for mode in "engine cuda" "hf-bf16 cuda" "hf-bf16 cpu"; do
      set -- $mode
      for tag in new base; do
        bin=$D/gapscope-engine$([ $tag = base ] && echo -base)
        $bin logits --model "$T/$m" --tokens "$T/$m/tokens.json" --numerics "$1" --backend "$2" \
          --out "$T/$m/$tag-$1-$2.f32" >> "$OUT/logits.txt" 2>&1
      done
      a=$(md5sum < "$T/$m/new-$1-$2.f32" | cut -c1-32)
      b=$(md5sum < "$T/$m/base-$1-$2.f32" | cut -c1-32)
      say "logits $m $1 $2: new $a base $b"
      record "logits $m $1 $2" "$([ "$a" = "$b" ] && [ -s "$T/$m/new-$1-$2.f32" ] && echo 0 || echo 1)" "$a"
    done
  done
  rm -rf "$T"
fi
if has calibrate; then
  $D/gapscope-engine calibrate -o "$OUT/calibrate-new.json" > "$OUT/calibrate-new.txt" 2>&1
  say "calibrate new rc=$?"
  if [ -x $D/gapscope-calibrate-base ]; then
    $D/gapscope-calibrate-base -o "$OUT/calibrate-base.json" > "$OUT/calibrate-base.txt" 2>&1
    say "calibrate base rc=$?"
  fi
  cat "$OUT"/calibrate-*.txt >> "$log"
fi
say ""
say "== verdict ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
for v in "${verdict[@]}"; do say "$v"; done
# The device tool brings back at most 8 files: everything but the log goes into one archive.
tmp=$(mktemp -d) && tar czf "$tmp/same-bits.tgz" -C "$OUT" --exclude same-bits.log . \
  && find "$OUT" -mindepth 1 ! -name same-bits.log -delete && mv "$tmp/same-bits.tgz" "$OUT/"
exit $fail
