// Forward hooks, as torch.nn.Module's register_forward_pre_hook and register_forward_hook: code
// that runs around a module's forward without being part of it (a parallel plan places a
// model's inputs and gathers its outputs with them, so the model stays single-device code).
// An around hook (diffusers' ModelHook.new_forward) gets forward itself and decides whether
// to call it (a step cache predicts an output instead).
// They run whenever forward runs, called directly or through call(): models call their
// submodules' forward directly. While a module has hooks its forward is an own property that
// wraps the one it had, as diffusers' HookRegistry and accelerate wrap a module's forward; the
// last hook removed puts the old one back.
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';
import type { Module } from './module.js';

/**
 * Runs before `module`'s forward with its arguments; returns the arguments forward gets instead
 * (an array), or nothing to leave them as they are.
 */
export type ForwardPreHook = (module: Module, args: unknown[]) => unknown[] | void;

/**
 * Runs after `module`'s forward with the arguments forward got and its output; returns the
 * output the caller gets instead, or nothing to leave it as it is.
 */
export type ForwardHook = (module: Module, args: unknown[], output: unknown) => unknown;

/**
 * Runs in place of `module`'s forward with its arguments and that forward (`forward(...args)`
 * runs it, or the hooks registered before this one around it); returns the output.
 */
export type ForwardAroundHook = (module: Module, forward: (...args: unknown[]) => unknown, args: unknown[]) => unknown;

/** What registering a hook returns: remove() takes the hook off again (a second call does nothing). */
export interface RemovableHandle {
  /** Takes the hook off; the module's forward runs without it from the next call on. */
  remove(): void;
}

type Forward = (...args: unknown[]) => unknown;

/** The hooks of one module and the forward that runs them (Module keeps one while it has hooks). */
export class ForwardHooks {
  readonly #module: Module;
  readonly #pre = new Map<number, ForwardPreHook>();
  readonly #post = new Map<number, ForwardHook>();
  readonly #around = new Map<number, ForwardAroundHook>();
  #next = 0;
  // the module's forward before the hooks: an own property it had, or undefined for its class's
  #inner: Forward | undefined;
  #wrapper: Forward | undefined;

  constructor(module: Module) {
    this.#module = module;
  }

  /** Adds `hook` to run before forward (`pre`), after it (`post`), or in its place (`around`). */
  add(kind: 'pre' | 'post' | 'around', hook: ForwardPreHook | ForwardHook | ForwardAroundHook): RemovableHandle {
    const what = { pre: 'registerForwardPreHook', post: 'registerForwardHook', around: 'registerForwardAroundHook' }[kind];
    if (typeof hook !== 'function') throw invalidParameter(`${what} hook`, 'a function', hook);
    const id = this.#next++;
    const hooks = this.#hooks(kind);
    hooks.set(id, hook);
    this.#install();
    return {
      remove: () => {
        hooks.delete(id);
        if (this.#pre.size === 0 && this.#post.size === 0 && this.#around.size === 0) this.#uninstall();
      },
    };
  }

  #hooks(kind: 'pre' | 'post' | 'around'): Map<number, unknown> {
    return kind === 'pre' ? this.#pre : kind === 'post' ? this.#post : this.#around;
  }

  #install(): void {
    if (this.#wrapper) return;
    const module = this.#module as unknown as Record<string, unknown>;
    this.#inner = Object.hasOwn(module, 'forward') ? (module['forward'] as Forward) : undefined;
    const forward = (this.#inner ?? (module['forward'] as Forward)).bind(module);
    const wrapper = (...given: unknown[]): unknown => {
      // a wrapper taken off (and kept by a caller) runs no hooks: the module's current one does
      if (this.#wrapper !== wrapper) return forward(...given);
      let args = given;
      for (const hook of this.#pre.values()) {
        const replaced = hook(this.#module, args);
        if (replaced === undefined) continue;
        if (!Array.isArray(replaced)) {
          throw new DTorchError(ErrorCode.InvalidArgument, `${this.#module.constructor.name}: a forward pre-hook returned ${typeof replaced}; return the arguments as an array, or nothing`);
        }
        args = replaced;
      }
      // each around hook wraps the forward and the around hooks registered before it
      let run: Forward = forward;
      for (const hook of this.#around.values()) {
        const inner = run;
        run = (...a: unknown[]) => hook(this.#module, inner, a);
      }
      let output = run(...args);
      for (const hook of this.#post.values()) {
        const replaced = hook(this.#module, args, output);
        if (replaced !== undefined) output = replaced;
      }
      return output;
    };
    this.#wrapper = wrapper;
    module['forward'] = wrapper;
  }

  // the old forward back, unless something replaced the wrapper since (that stays, and the
  // wrapper it may call passes straight through)
  #uninstall(): void {
    const module = this.#module as unknown as Record<string, unknown>;
    if (module['forward'] === this.#wrapper) {
      if (this.#inner) module['forward'] = this.#inner;
      else delete module['forward'];
    }
    this.#wrapper = undefined;
    this.#inner = undefined;
  }
}
