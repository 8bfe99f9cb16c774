// A linear layer over concatenated inputs, computed as the sum of each part's product with its
// own block of input columns (diffusers' PackedRowwiseParallel for Flux's single blocks, whose
// proj_out takes the attention's output and the MLP's side by side). On one device it is the
// same product without the concatenated copy; under 'tp' each part arrives split by features
// (from colwise layers), meets the matching columns of the whole weight (sliced locally), and the
// partial sums are reduced once, where torch.cat of the split parts would have to gather them.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';

/** linear.forward(cat(parts, -1)), as Σ parts[i] · weight[:, block i]ᵀ, reduced, plus the bias. */
export function packedLinear(linear: nn.Linear, parts: readonly dt.Tensor[]): dt.Tensor {
  return dt.tidy(() => {
    // unsplit, the bias rides on the first product (the matmul's epilogue on GPUs, not a
    // broadcast add over every token after it); split by features (the parts come from colwise
    // layers under 'tp'), the products are partial sums and the bias is added once, after they
    // are reduced
    const first = parts[0]!;
    const splitByFeatures = first.placements.some((p) => p.isShard(first.shape.length - 1));
    // the linear's LoRA adapters ride on its forward, which this product does not call: unsplit,
    // their products accumulate into the parts' sum at the end (the base matmuls keep their own
    // kernels and the bias its epilogue); split, their delta is added to the reduced sum
    let sum: dt.Tensor | undefined;
    // unsplit and laid tall (nn.LinearLora.tall), the parts multiply [W; A] and the sum is finished
    const tall = splitByFeatures ? undefined : nn.linearLora(linear)?.tall();
    const weight = tall?.weight ?? linear.weight;
    // FP8 weights: each part quantized per token over its own width (finer scales than the
    // concatenated row's, and no pass over the parts first); a part split by features takes its
    // amax over all its ranks, so a mesh gives one device's numbers
    let offset = 0;
    for (const part of parts) {
      const width = part.shape.at(-1)!;
      const bias = part === first && !splitByFeatures ? (tall ? tall.bias : linear.bias) : undefined;
      const amax = linear.weight_scale && splitByFeatures ? nn.rowAmax([part]) : undefined;
      const product = nn.linearProduct(linear, part, bias, weight.narrow(1, offset, width), amax);
      sum = sum ? product.add(sum) : product;
      offset += width;
    }
    const reduced = sum!.placements.some((p) => p.isPartial()) ? sum!.redistribute(sum!.placements.map((p) => (p.isPartial() ? dt.Replicate() : p))) : sum!;
    const whole = linear.bias && splitByFeatures ? reduced.add(linear.bias) : reduced;
    if (tall) return tall.finish(whole);
    if (!splitByFeatures) return nn.linearLora(linear)?.accumulate(parts, whole) ?? whole;
    const delta = nn.loraDelta(linear, parts, whole);
    return delta ? whole.add(delta) : whole;
  });
}
