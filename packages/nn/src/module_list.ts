// ModuleList: modules held in a list, keyed 0, 1, 2, ... in state dicts (transformer_blocks.3.*).
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';
import { Module } from './module.js';

export class ModuleList<T extends Module = Module> extends Module {
  constructor(modules: Iterable<T> = []) {
    super();
    for (const m of modules) this.append(m);
  }

  append(module: T): this {
    if (!(module instanceof Module)) throw invalidParameter(`${this.constructor.name} entry ${this.length}`, 'Module', module);
    (this as unknown as Record<string, Module>)[String(this.length)] = module;
    return this;
  }

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

  *[Symbol.iterator](): Iterator<T> {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }

  forward(..._args: unknown[]): unknown {
    throw new DTorchError(ErrorCode.InvalidArgument, `${this.constructor.name} has no forward(); iterate over it and call its modules`);
  }
}
