// T5's relative position buckets (Mesh TensorFlow's scheme): exact buckets for small distances,
// logarithmically wider ones up to maxDistance, one bucket beyond. Computed with tensor ops, in
// the same float32 steps as transformers' _relative_position_bucket, so the bucket boundaries
// (where a log lands on an integer) round as they do in PyTorch.
import * as dt from '@dtorch/api';

/** Buckets [queryLength, keyLength] (int64) of memory position minus query position. */
export function relativePositionBuckets(
  queryLength: number,
  keyLength: number,
  options: { bidirectional: boolean; numBuckets: number; maxDistance: number; mesh: dt.DeviceMesh },
): dt.Tensor {
  return dt.tidy(() => {
    const mesh = options.mesh;
    const context = dt.arange(queryLength, undefined, 1, { mesh }).reshape([queryLength, 1]);
    const memory = dt.arange(keyLength, undefined, 1, { mesh }).reshape([1, keyLength]);
    let position = memory.sub(context);
    let numBuckets = options.numBuckets;
    let buckets: dt.Tensor | number = 0;
    if (options.bidirectional) {
      numBuckets = Math.floor(numBuckets / 2);
      buckets = position.gt(0).to('int64').mul(numBuckets);
      position = position.abs();
    } else {
      position = position.minimum(0).neg();
    }
    const maxExact = Math.floor(numBuckets / 2);
    const isSmall = position.lt(maxExact);
    const logarithmic = position
      .to('float32')
      .div(maxExact)
      .log()
      .div(Math.log(options.maxDistance / maxExact))
      .mul(numBuckets - maxExact)
      .to('int64')
      .add(maxExact)
      .minimum(numBuckets - 1);
    return dt.where(isSmall, position, logarithmic).add(buckets);
  });
}
