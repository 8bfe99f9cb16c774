#!/usr/bin/env node
// Writes Tensor's op methods (packages/api/src/tensor.ts, between its two marker lines) from the
// op functions of packages/api/src/ops/*.ts, so that an op's function is the one place its
// method is declared: a function whose doc ends with `@see {@link Tensor.<its name>}` is also a
// Tensor method, `x.name(...rest)` calling `name(x, ...rest)` with the function's parameters (but
// the first), return type and doc. A method tensor.ts writes by hand, outside the markers (one
// whose arguments differ from its function's, as `where` or `max`), is left to it. Run after
// adding or changing an op function; with --check it changes nothing and fails while tensor.ts is
// out of date (packages/api/src/tensor_methods.test.ts runs it so).
//   node scripts/gen-tensor-methods.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'packages', 'api', 'src');
const tensorFile = join(src, 'tensor.ts');
const BEGIN = '  // ---- ops: written by scripts/gen-tensor-methods.mjs from the op functions (ops/*.ts); do not edit ----';
const END = '  // ---- end of the written ops ----';

class GenError extends Error {}
const fail = (message) => {
  throw new GenError(`gen-tensor-methods: ${message}`);
};
const parse = (file) => ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
const isExported = (node) => ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export;

// What tensor.ts has: its op families (`import * as <ns> from './ops/<family>.js'`, in order) and
// the names of the methods it writes by hand.
function readTensor(text) {
  const [begin, end] = [text.indexOf(`${BEGIN}\n`), text.indexOf(`${END}\n`)];
  if (begin < 0 || end < begin) fail(`tensor.ts lacks the marker lines\n${BEGIN}\n${END}`);
  const sf = ts.createSourceFile(tensorFile, text, ts.ScriptTarget.Latest, true);
  const families = new Map();
  const byHand = new Set();
  for (const node of sf.statements) {
    const clause = ts.isImportDeclaration(node) ? node.importClause : undefined;
    const from = clause && /^\.\/ops\/(\w+)\.js$/.exec(node.moduleSpecifier.text);
    if (from && clause.namedBindings && ts.isNamespaceImport(clause.namedBindings)) families.set(from[1], clause.namedBindings.name.text);
    if (ts.isClassDeclaration(node) && node.name?.text === 'Tensor') {
      for (const member of node.members) {
        const at = member.getStart(sf);
        if (member.name && (at < begin || at > end)) byHand.add(member.name.getText(sf));
      }
    }
  }
  return { begin: begin + BEGIN.length + 1, end, families, byHand };
}

// The doc comment of a top-level declaration, as lines without the comment's frame.
function docLines(sf, declaration) {
  const doc = ts.getJSDocCommentsAndTags(declaration).filter((d) => ts.isJSDoc(d)).at(-1);
  if (!doc) return [];
  return sf.text
    .slice(doc.getStart(sf), doc.end)
    .replace(/^\/\*\*\s*|\s*\*\/$/g, '')
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, ''));
}

// `node`'s text with the type names the family file declares qualified by its namespace
// (`Operand` as `elementwise.Operand`): tensor.ts sees them only through the namespace import.
function qualified(sf, node, ns, types, where) {
  const edits = [];
  const visit = (n) => {
    if (ts.isTypeReferenceNode(n) && ts.isIdentifier(n.typeName) && types.has(n.typeName.text)) {
      if (!types.get(n.typeName.text)) fail(`${where} uses ${n.typeName.text}, which its file does not export; export it or write the method in tensor.ts by hand`);
      edits.push(n.typeName.getStart(sf) - node.getStart(sf));
    }
    ts.forEachChild(n, visit);
  };
  visit(node);
  let text = node.getText(sf);
  for (const at of edits.sort((a, b) => b - a)) text = `${text.slice(0, at)}${ns}.${text.slice(at)}`;
  return text;
}

// The Tensor methods one family file declares, in its order.
function familyMethods(family, ns, byHand) {
  const file = join(src, 'ops', `${family}.ts`);
  const sf = parse(file);
  const where = (name) => `${relative(root, file)}: ${name}`;
  const types = new Map(); // type names declared in the file: exported or not
  const functions = new Map(); // function name: its declarations (several when overloaded)
  const consts = new Map(); // const name: its initializer
  const docs = new Map(); // exported name: its declaration (the first, where overloaded)
  for (const node of sf.statements) {
    if (ts.isTypeAliasDeclaration(node) || ts.isInterfaceDeclaration(node) || ts.isClassDeclaration(node) || ts.isEnumDeclaration(node)) {
      if (node.name) types.set(node.name.text, Boolean(isExported(node)));
    }
    if (ts.isFunctionDeclaration(node) && node.name) {
      const name = node.name.text;
      functions.set(name, [...(functions.get(name) ?? []), node]);
      if (isExported(node) && !docs.has(name)) docs.set(name, node);
    }
    if (ts.isVariableStatement(node)) {
      for (const d of node.declarationList.declarations) {
        if (!ts.isIdentifier(d.name) || !d.initializer) continue;
        consts.set(d.name.text, d.initializer);
        if (isExported(node)) docs.set(d.name.text, d);
      }
    }
  }
  // the signature a name stands for: a function, an arrow function, or another name of the file
  const signatureOf = (name, seen = new Set()) => {
    if (seen.has(name)) fail(`${where(name)} is defined through itself`);
    seen.add(name);
    const decls = functions.get(name);
    if (decls) {
      if (decls.length > 1) fail(`${where(name)} is overloaded; write its method in tensor.ts by hand`);
      return decls[0];
    }
    const init = consts.get(name);
    if (init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init))) return init;
    if (init && ts.isIdentifier(init)) return signatureOf(init.text, seen);
    return fail(`${where(name)} is not a function of its file`);
  };
  const methods = [];
  for (const [name, declaration] of docs) {
    const lines = docLines(sf, declaration);
    const see = lines.findIndex((line) => /^@see \{@link Tensor\.\w+\}$/.test(line.trim()));
    if (see < 0) continue;
    const method = /Tensor\.(\w+)/.exec(lines[see])[1];
    if (method !== name) fail(`${where(name)} says it is Tensor.${method}; a method has its function's name`);
    if (byHand.has(name)) continue;
    const sig = signatureOf(name);
    if (sig.parameters.length === 0) fail(`${where(name)} takes no tensor to be the method's this`);
    if (!sig.type) fail(`${where(name)} needs its return type written out`);
    const [self, ...rest] = sig.parameters;
    const params = rest.map((p) => qualified(sf, p, ns, types, where(name)));
    const args = rest.map((p) => `${p.dotDotDotToken ? '...' : ''}${p.name.getText(sf)}`);
    const first = self.name.getText(sf);
    const doc = lines.filter((_, i) => i !== see);
    while (doc.length > 0 && doc.at(-1).trim() === '') doc.pop();
    const tags = doc.findIndex((line) => line.startsWith('@'));
    const link = `\`${first}.${name}(${args.join(', ')})\` is {@link @dtorch/api!${name} | ${name}}(${[first, ...args].join(', ')}).`;
    doc.splice(tags < 0 ? doc.length : tags, 0, link);
    methods.push(
      [
        '  /**',
        ...doc.map((line) => `   *${line ? ` ${line}` : ''}`),
        '   */',
        `  ${name}(${params.join(', ')}): ${qualified(sf, sig.type, ns, types, where(name))} {`,
        `    return ${ns}.${name}(${['this', ...args].join(', ')});`,
        '  }',
      ].join('\n'),
    );
  }
  return methods;
}

function main() {
  const check = process.argv.includes('--check');
  const text = readFileSync(tensorFile, 'utf8');
  const { begin, end, families, byHand } = readTensor(text);
  const declared = ts.sys.readDirectory(join(src, 'ops'), ['.ts']).filter((f) => !f.endsWith('.test.ts'));
  for (const file of declared) {
    const family = /(\w+)\.ts$/.exec(file)[1];
    if (!families.has(family) && /@see \{@link Tensor\./.test(readFileSync(file, 'utf8'))) {
      fail(`ops/${family}.ts declares Tensor methods; import it in tensor.ts: import * as ${family} from './ops/${family}.js';`);
    }
  }
  const methods = [...families].flatMap(([family, ns]) => familyMethods(family, ns, byHand));
  const written = `${text.slice(0, begin)}${methods.join('\n')}\n${text.slice(end)}`;
  if (written === text) {
    console.log(`gen-tensor-methods: tensor.ts is up to date (${methods.length} methods)`);
    return;
  }
  if (check) fail('packages/api/src/tensor.ts is out of date with the op functions: run node scripts/gen-tensor-methods.mjs');
  writeFileSync(tensorFile, written);
  console.log(`gen-tensor-methods: ${methods.length} methods written to packages/api/src/tensor.ts`);
}

try {
  main();
} catch (err) {
  if (!(err instanceof GenError)) throw err;
  console.error(err.message);
  process.exit(1);
}
