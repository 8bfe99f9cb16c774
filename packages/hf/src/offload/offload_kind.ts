// Which kind of offloading a model is under (model CPU offload or group offloading): one kind at
// a time, as diffusers refuses to mix them, since each would move the other's weights.
import type * as nn from '@dtorch/nn';

/** The kinds of offloading. */
export type OffloadKind = 'model' | 'group';

const kinds = new WeakMap<nn.Module, OffloadKind>();

/** The kind of offloading `model` is under now, if any. */
export function offloadKindOf(model: nn.Module): OffloadKind | undefined {
  return kinds.get(model);
}

/** Records that `model` is under `kind` of offloading from now on (undefined: none). */
export function setOffloadKind(model: nn.Module, kind: OffloadKind | undefined): void {
  if (kind) kinds.set(model, kind);
  else kinds.delete(model);
}
