#!/usr/bin/env bash
# How the shipped shapes-flux was trained: on the GPU machine (the device tool, a 10-minute call),
# carrying diffusers' source as .device/diffusers-src.tar.xz. Times each stage first (--probe), then
# sizes the run to fit the call; the steps it chose are in plan.txt and train_log.json's args, and
# `train.py --vae-steps V --steps S` with them repeats the run. Writes $OUT/shapes-flux.tar (the
# pipeline folder, train_log.json, samples-*.png) and $OUT/{probe,plan,train}.log. SECONDS_TARGET (default
# 565) is how long the whole call may take.
set -e
mkdir -p /tmp/d && tar -xJf .device/diffusers-src.tar.xz -C /tmp/d
export PYTHONPATH=/tmp/d/src PYTHONUNBUFFERED=1
python3 tools/shapes/train.py --out /tmp/probe --probe 2>&1 | grep -v Warning > $OUT/probe.log
grep steps_per_second $OUT/probe.log
read -r V F S < <(python3 -c "import json;r=[json.loads(l) for l in open('$OUT/probe.log') if l.startswith('{\"steps_per')][0]['steps_per_second'];print(r['vae'],r['flow'],r['scenes'])")
plan=$(python3 -c "
v, f, s, spent = $V, $F, $S, $SECONDS
render = 120000 / s + 15
vae = min(3000, int(v * 60) // 500 * 500)
flow = min(40000, int(f * (${SECONDS_TARGET:-565} - spent - render - vae / v - 90)) // 500 * 500)
print(vae, flow)")
read -r V_STEPS F_STEPS <<< "$plan"
echo "probe took $SECONDS s; vae $V_STEPS steps, flow $F_STEPS steps" | tee $OUT/plan.txt
python3 tools/shapes/train.py --out /tmp/out/shapes-flux --vae-steps $V_STEPS --steps $F_STEPS --checkpoint $OUT/ckpt.pt 2>&1 \
  | grep -v "Warning\|it/s\]" > $OUT/train.log || true
grep '^{' $OUT/train.log | awk 'NR%4==1 || /accuracy|parameters|factor/' | cut -c1-400
tar -cf $OUT/shapes-flux.tar -C /tmp/out shapes-flux && rm -f $OUT/ckpt.pt
echo total $SECONDS s
