'use strict';
/**
 * Every public export of the package is typed, and every value its declarations promise
 * exists: for each entry point in package.json's "exports" (`trainbridge`, `trainbridge/shell`)
 * the names its code exports are compared with the value exports (functions, classes,
 * consts) of its .d.ts as the TypeScript compiler reads them. A new export without a declaration, or a declaration left behind by a removed
 * export, fails here. (test/types.test.js checks that the declarations are usable.)
 */

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const ts = require('typescript');

function typedValueExports(declarations) {
  const file = path.join(__dirname, '..', declarations);
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

// Every entry point of package.json's "exports" with types: [its code, its declarations].
const pkg = require('../package.json');
const entries = Object.entries(pkg.exports)
  .filter(([, target]) => typeof target === 'object' && target.types)
  .map(([name, target]) => [name, target.default, target.types]);

test('package.json has typed entry points', () => {
  assert.ok(entries.some(([name]) => name === '.'), JSON.stringify(pkg.exports));
});

for (const [name, code, declarations] of entries) {
  test(`every export of "${name}" (${code}) is declared in ${declarations}, and nothing more`, () => {
    const runtime = Object.keys(require(path.join(__dirname, '..', code))).sort();
    const typed = typedValueExports(declarations);
    assert.ok(runtime.length > 0, `${code} exports nothing`);
    assert.deepEqual(runtime.filter((n) => !typed.includes(n)), [],
      `exported by ${code} but not declared in ${declarations}`);
    assert.deepEqual(typed.filter((n) => !runtime.includes(n)), [],
      `declared in ${declarations} but not exported by ${code}`);
  });
}
