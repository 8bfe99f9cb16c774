#!/usr/bin/env bash
# The second call of the shipped shapes-flux's training: the first call's pipeline (train_on_device.sh's
# shapes-flux.tar, carried as $INIT) trained on for $STEPS more transformer steps on new scenes (--seed
# $SEED), its VAE kept. Writes $OUT/shapes-flux.tar and $OUT/train.log as train_on_device.sh does.
set -e
mkdir -p /tmp/d /tmp/init && tar -xJf .device/diffusers-src.tar.xz -C /tmp/d && tar -xf "${INIT:?the first call\'s shapes-flux.tar}" -C /tmp/init
export PYTHONPATH=/tmp/d/src PYTHONUNBUFFERED=1
python3 tools/shapes/train.py --out /tmp/out/shapes-flux --init /tmp/init/shapes-flux --vae-steps 0 \
  --steps "${STEPS:?}" --seed "${SEED:-1}" --lr "${LR:-3e-4}" 2>&1 | grep -v "Warning\|it/s\]" > $OUT/train.log || true
grep '^{' $OUT/train.log | awk 'NR%4==1 || /accuracy|parameters|factor/' | cut -c1-300
tar -cf $OUT/shapes-flux.tar -C /tmp/out shapes-flux
echo total $SECONDS s
