'use strict';
/**
 * Every public export of the package is typed, and every value index.d.ts declares exists:
 * the names src/index.js exports (what `require('trainbridge')` gives) are compared with the
 * value exports of index.d.ts (functions, classes, consts) as the TypeScript compiler reads
 * them. A new export without a declaration, or a declaration left behind by a removed
 * export, fails here. (test/types.test.js checks that the declarations are usable.)
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const ts = require('typescript');

function typedValueExports() {
  const file = path.join(__dirname, '..', 'index.d.ts');
  const program = ts.createProgram([file], { noEmit: true, types: ['node'] });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  assert.ok(moduleSymbol, 'index.d.ts is not read as a module');
  return checker.getExportsOfModule(moduleSymbol)
    .filter((symbol) => symbol.flags & ts.SymbolFlags.Value)
    .map((symbol) => symbol.getName())
    .sort();
}

test('every public Node export is declared in index.d.ts, and nothing more', () => {
  const runtime = Object.keys(require('../src/index.js')).sort();
  const typed = typedValueExports();
  assert.ok(runtime.length > 5, `src/index.js exports only ${runtime}`);
  assert.deepEqual(runtime.filter((name) => !typed.includes(name)), [],
    'exported by src/index.js but not declared in index.d.ts');
  assert.deepEqual(typed.filter((name) => !runtime.includes(name)), [],
    'declared in index.d.ts but not exported by src/index.js');
});
