// Module: the base of every layer and model, as torch.nn.Module. Submodules and parameters are
// registered by assigning properties (`this.fc1 = new Linear(...)`, `this.weight = new
// Parameter(...)`); their dotted paths are the state-dict keys (`layers.0.weight`), so a
// property is named as its checkpoint key. Buffers are registered with registerBuffer().
// forward() may be called directly; call() runs it inside tidy() so intermediates are freed.
// Forward hooks (forward_hooks.ts) run code around forward from outside the module.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkOptions, invalidParameter } from '@dtorch/common';
import { ForwardHooks, type ForwardAroundHook, type ForwardHook, type ForwardPreHook, type RemovableHandle } from './forward_hooks.js';
import { Parameter } from './parameter.js';
import { loadStateDict, stateDict, type LoadStateDictOptions, type LoadStateDictResult, type StateDictSource } from './state_dict.js';

const sameLayout = (a: dt.Tensor, b: dt.Tensor) =>
  a.dtype === b.dtype && a.mesh === b.mesh && a.shape.length === b.shape.length && a.shape.every((n, i) => n === b.shape[i]);

// How deep the current call() is: only the outermost one may start a step.
let callDepth = 0;

/**
 * The base of every layer and model, as torch.nn.Module. Submodules and parameters are
 * registered by assigning properties; their dotted paths are the state-dict keys
 * (`layers.0.weight`). Subclasses implement forward(); call() runs it inside tidy().
 */
export abstract class Module {
  /** Dropout and friends act only in training mode; modules start in eval mode (inference). */
  training = false;
  readonly #buffers = new Set<string>();
  // set by compile(): call() then runs through it
  #compiled: ((...args: unknown[]) => unknown) | undefined;
  // made by the first hook registered
  #hooks: ForwardHooks | undefined;

  /**
   * The module's computation, as torch.nn.Module.forward; each subclass types its own
   * arguments and result. Called directly, intermediates are left to the enclosing tidy();
   * call() frees them.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each module types its own forward
  abstract forward(...args: any[]): any;

  /** forward(...args) inside tidy(): only the returned tensors survive. */
  call<A extends unknown[], R>(this: Module & { forward(...args: A): R }, ...args: A): R {
    // the outermost call may start a step (dt.graph.beginCall): a model called again on the same
    // shapes is cut into the same segments, which the engine recognises and replays
    if (callDepth === 0) dt.graph.beginCall();
    callDepth++;
    try {
      return this.#compiled ? (this.#compiled(...args) as R) : dt.tidy(() => this.forward(...args));
    } finally {
      callDepth--;
    }
  }

  /**
   * Compiles call() for replay (dt.graph.compile), as torch.nn.Module.compile: the first call
   * on inputs of given shapes runs forward() and keeps what it recorded; later calls on inputs
   * of the same shapes record a copy of it without running forward() again, so a model called
   * again and again costs the program almost nothing per call. Results are the same bits.
   * Replacing a parameter by disposing it (loadStateDict does) traces again; forward() must not
   * branch on anything but its inputs' shapes and the module's settings as they are now.
   * Returns the module.
   */
  compile(options?: dt.graph.CompileOptions): this {
    this.#compiled = dt.graph.compile((...args: unknown[]) => dt.tidy(() => this.forward(...args)), options);
    return this;
  }

  /** What the compiled call() did so far (undefined before compile()). */
  get compileStats(): Readonly<dt.graph.CompiledStats> | undefined {
    return (this.#compiled as dt.graph.CompiledFunction<unknown[], unknown> | undefined)?.stats;
  }

  /**
   * Runs `hook` before every forward of this module, as torch.nn.Module.register_forward_pre_hook:
   * it gets the arguments and may return others. Hooks run in the order registered, whenever
   * forward runs (called directly or through call()). Returns a handle whose remove() takes it off.
   */
  registerForwardPreHook(hook: ForwardPreHook): RemovableHandle {
    return (this.#hooks ??= new ForwardHooks(this)).add('pre', hook);
  }

  /**
   * Runs `hook` after every forward of this module, as torch.nn.Module.register_forward_hook: it
   * gets the arguments and the output and may return another output. Hooks run in the order
   * registered, whenever forward runs. Returns a handle whose remove() takes it off.
   */
  registerForwardHook(hook: ForwardHook): RemovableHandle {
    return (this.#hooks ??= new ForwardHooks(this)).add('post', hook);
  }

  /**
   * Runs `hook` in place of this module's forward, as diffusers' ModelHook.new_forward: it gets
   * the arguments and the forward (with the around hooks registered before it), calls it or not,
   * and returns the output. It runs after the pre-hooks and before the hooks. Returns a handle
   * whose remove() takes it off.
   */
  registerForwardAroundHook(hook: ForwardAroundHook): RemovableHandle {
    return (this.#hooks ??= new ForwardHooks(this)).add('around', hook);
  }

  /** Registers `tensor` as buffer `name` (state, not a parameter, e.g. running statistics). */
  registerBuffer(name: string, tensor: dt.Tensor | undefined): void {
    if (typeof name !== 'string' || name.length === 0 || name.includes('.')) throw invalidParameter('registerBuffer name', 'non-empty name without dots', name);
    if (tensor !== undefined && !(tensor instanceof dt.Tensor)) throw invalidParameter(`registerBuffer ${name}`, 'Tensor or undefined', tensor);
    if (tensor) dt.keep(tensor);
    this.#buffers.add(name);
    (this as unknown as Record<string, unknown>)[name] = tensor;
  }

  /** Direct submodules, in assignment order. */
  *namedChildren(): Generator<[string, Module]> {
    for (const [name, value] of Object.entries(this)) if (value instanceof Module) yield [name, value];
  }

  /** This module ('') and every submodule with its dotted path, each module once. */
  *namedModules(prefix = '', seen = new Set<Module>()): Generator<[string, Module]> {
    if (seen.has(this)) return;
    seen.add(this);
    yield [prefix, this];
    for (const [name, child] of this.namedChildren()) yield* child.namedModules(prefix ? `${prefix}.${name}` : name, seen);
  }

  /** Every parameter with its state-dict key, each parameter once (shared ones under their first key). */
  *namedParameters(): Generator<[string, Parameter]> {
    const seen = new Set<Parameter>();
    for (const [path, module] of this.namedModules()) {
      for (const [name, value] of Object.entries(module)) {
        if (value instanceof Parameter && !seen.has(value)) {
          seen.add(value);
          yield [path ? `${path}.${name}` : name, value];
        }
      }
    }
  }

  /** Every registered buffer with its state-dict key. */
  *namedBuffers(): Generator<[string, dt.Tensor]> {
    for (const [path, module] of this.namedModules()) {
      for (const name of module.#buffers) {
        const value = (module as unknown as Record<string, unknown>)[name];
        if (value instanceof dt.Tensor) yield [path ? `${path}.${name}` : name, value];
      }
    }
  }

  /** Every parameter, in namedParameters() order (each shared parameter once). */
  parameters(): Parameter[] {
    return [...this.namedParameters()].map(([, p]) => p);
  }

  /** Elements in all parameters (each shared parameter once). */
  numParameters(): number {
    return this.parameters().reduce((n, p) => n + p.numel, 0);
  }

  /**
   * Sets the parameter or buffer at dotted `key` to `value`, which it takes over: a parameter of
   * the same shape, dtype and mesh keeps its object and takes the value (references to it stay
   * valid); otherwise the old tensor is disposed and replaced (a Parameter for a parameter key).
   * Used by loadStateDict and to().
   */
  setTensor(key: string, value: dt.Tensor): void {
    const at = key.lastIndexOf('.');
    const owner = at < 0 ? this : this.getSubmodule(key.slice(0, at));
    const name = key.slice(at + 1);
    const record = owner as unknown as Record<string, unknown>;
    const old = record[name];
    const isBuffer = owner.#buffers.has(name);
    if (!isBuffer && !(old instanceof Parameter)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${this.constructor.name} has no parameter or buffer "${key}"`);
    }
    if (old instanceof Parameter && old !== value && sameLayout(old, value)) {
      old.adopt(value); // the same Parameter object takes the new value, as PyTorch copies into it
      return;
    }
    record[name] = isBuffer ? dt.keep(value) : value instanceof Parameter ? value : new Parameter(value);
    if (old instanceof dt.Tensor && old !== value) old.dispose();
  }

  /** The submodule at dotted `path` ('' is this module). */
  getSubmodule(path: string): Module {
    return (path === '' ? [] : path.split('.')).reduce<Module>((module, part) => {
      const next = (module as unknown as Record<string, unknown>)[part];
      if (!(next instanceof Module)) throw new DTorchError(ErrorCode.InvalidArgument, `${this.constructor.name} has no submodule "${path}" (no "${part}")`);
      return next;
    }, this);
  }

  /** Casts every floating parameter and buffer to `dtype`, in place; returns this module. */
  to(dtype: dt.DType): this {
    dt.checkDtype(dtype, 'Module.to dtype');
    const floating = ['float32', 'float16', 'bfloat16', 'float64'];
    for (const [key, t] of [...this.namedParameters(), ...this.namedBuffers()]) {
      if (floating.includes(t.dtype) && t.dtype !== dtype) this.setTensor(key, t.to(dtype));
    }
    return this;
  }

  /** Training mode (on) or eval mode (off), for this module and every submodule. */
  train(on = true): this {
    for (const [, m] of this.namedModules()) m.training = on;
    return this;
  }

  /** Eval mode for this module and every submodule (train(false)); returns this module. */
  eval(): this {
    return this.train(false);
  }

  /**
   * Loads parameters and buffers from a state dict: a path to a `.safetensors` file or a
   * `*.safetensors.index.json`, or a Map / object of tensors. Each parameter gets exactly its
   * placements' slice (from a file, each rank reads only its own bytes), converted to its dtype
   * (or `dtype`). Missing and unexpected keys throw under `strict` (default) or are returned.
   * Every shape is checked before anything is replaced: a mismatch throws (ShapeMismatch) and
   * leaves the module as it was. See LoadStateDictOptions and LoadStateDictResult.
   */
  async loadStateDict(source: StateDictSource, options?: LoadStateDictOptions): Promise<LoadStateDictResult> {
    return loadStateDict(this, source, checkOptions<LoadStateDictOptions>('loadStateDict options', options));
  }

  /** Every parameter and buffer gathered to a full (replicated) tensor, by key; dispose them after use. */
  stateDict(): Map<string, dt.Tensor> {
    return stateDict(this);
  }

  /** Disposes every parameter and buffer. */
  dispose(): void {
    for (const [, t] of [...this.namedParameters(), ...this.namedBuffers()]) t.dispose();
  }

  /** What this module shows after its name, e.g. `in_features=16, out_features=32, bias=true`. */
  extraRepr(): string {
    return '';
  }

  /** A readable tree, as PyTorch prints modules. */
  toString(): string {
    const extra = this.extraRepr();
    const children = [...this.namedChildren()].map(([name, child]) => `(${name}): ${child.toString()}`);
    if (children.length === 0) return `${this.constructor.name}(${extra})`;
    const lines = [...(extra ? [extra] : []), ...children].map((line) => `  ${line.split('\n').join('\n  ')}`);
    return `${this.constructor.name}(\n${lines.join('\n')}\n)`;
  }
}
