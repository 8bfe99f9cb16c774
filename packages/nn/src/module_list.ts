// ModuleList: modules held in a list, keyed 0, 1, 2, ... in state dicts (transformer_blocks.3.*).
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';
import { Module } from './module.js';

/**
 * Modules held in a list, as torch.nn.ModuleList: entry i is the property `i`, so its keys
 * in state dicts are `i.*` (`transformer_blocks.3.attn.weight`). It has no forward().
 */
export class ModuleList<T extends Module = Module> extends Module {
  constructor(modules: Iterable<T> = []) {
    super();
    for (const m of modules) this.append(m);
  }

  /** Adds `module` as the next entry (key `length`); returns this list. */
  append(module: T): this {
    if (!(module instanceof Module)) throw invalidParameter(`${this.constructor.name} entry ${this.length}`, 'Module', module);
    (this as unknown as Record<string, Module>)[String(this.length)] = module;
    return this;
  }

  /** Number of entries. */
  get length(): number {
    let n = 0;
    while ((this as unknown as Record<string, unknown>)[String(n)] instanceof Module) n++;
    return n;
  }

  /** The module at `index` (negative counts from the end). */
  at(index: number): T {
    const i = index < 0 ? index + this.length : index;
    const m = (this as unknown as Record<string, unknown>)[String(i)];
    if (!Number.isInteger(i) || !(m instanceof Module)) throw invalidParameter(`${this.constructor.name} index`, `integer in [${-this.length}, ${this.length})`, index);
    return m as T;
  }

  /** The entries in order (`for (const block of blocks)`). */
  *[Symbol.iterator](): Iterator<T> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }

  /** Always throws: a ModuleList is a container; iterate over it and call its modules. */
  forward(..._args: unknown[]): unknown {
    throw new DTorchError(ErrorCode.InvalidArgument, `${this.constructor.name} has no forward(); iterate over it and call its modules`);
  }
}
