// Module paths in plans: dotted paths as namedModules gives them ('transformer_blocks.3.attn'),
// named by patterns in which '*' stands for any one part ('transformer_blocks.*.attn'); '' is
// the model itself.
/** Whether `pattern` names the module at `path`. */
export function matchesPath(pattern: string, path: string): boolean {
  const [p, q] = [pattern.split('.'), path.split('.')];
  return p.length === q.length && p.every((part, i) => part === '*' || part === q[i]);
}

/** The entry of the first pattern in `plan` that names `path`, if any. */
export function entryFor<T>(plan: Readonly<Record<string, T>>, path: string): T | undefined {
  return Object.entries(plan).find(([pattern]) => matchesPath(pattern, path))?.[1];
}
