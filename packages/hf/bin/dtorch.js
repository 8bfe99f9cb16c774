#!/usr/bin/env node
// The `dtorch` command's entry: a plain file that exists before the TypeScript is built, so that
// npm links it into node_modules/.bin at `npm install` (npm skips a bin whose file is missing,
// and dist/ is built by the postinstall step, after the links are made).
try {
  await import('../dist/cli/main.js');
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/cli/main.js')) throw err;
  process.stderr.write('error: @dtorch/hf is not built (no dist/cli/main.js); run `npm run build`\n');
  process.exit(1);
}
