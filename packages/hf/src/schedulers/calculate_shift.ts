// The Flux pipeline's calculate_shift: the `mu` of dynamic shifting, linear in the image's
// sequence length (the number of 2x2 latent patches: (height / 16) * (width / 16)).
import { checkFinite, checkInteger } from '@dtorch/common';

/**
 * diffusers' calculate_shift: the `mu` for setTimesteps, linear from baseShift at baseSeqLen
 * image tokens to maxShift at maxSeqLen (the scheduler config's base_image_seq_len,
 * max_image_seq_len, base_shift, max_shift; defaults FLUX.1's).
 */
export function calculateShift(imageSeqLen: number, baseSeqLen = 256, maxSeqLen = 4096, baseShift = 0.5, maxShift = 1.15): number {
  checkFinite('calculateShift imageSeqLen', imageSeqLen, 0);
  checkInteger('calculateShift baseSeqLen', baseSeqLen);
  checkInteger('calculateShift maxSeqLen', maxSeqLen);
  checkFinite('calculateShift baseShift', baseShift);
  checkFinite('calculateShift maxShift', maxShift);
  if (maxSeqLen === baseSeqLen) checkInteger('calculateShift maxSeqLen (it must differ from baseSeqLen)', maxSeqLen, baseSeqLen + 1);
  const m = (maxShift - baseShift) / (maxSeqLen - baseSeqLen);
  const b = baseShift - m * baseSeqLen;
  return imageSeqLen * m + b;
}
