'use strict';
// eslint's settings for node-client (scripts/lint runs `eslint --max-warnings 0 .` here;
// `scripts/lint --fix` applies eslint's automatic fixes). Only this file configures it.
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  { ignores: ['node_modules/', 'python/', 'test-output/'] },
  js.configs.recommended,
  {
    // The package, its tests, benchmarks, examples and the dashboard's server: CommonJS on Node.
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'commonjs',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // An unused variable is a leftover or a bug; `_name` marks one kept on purpose
      // (a required parameter, a destructured field left out).
      'no-unused-vars': ['error', {
        args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_',
        caughtErrors: 'all', caughtErrorsIgnorePattern: '^_',
      }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-var': 'error',
      // A destructuring whose names are partly reassigned stays one `let` (no auto-fix exists).
      'prefer-const': ['error', { destructuring: 'all' }],
      strict: ['error', 'global'],
      'no-shadow': 'error',
      'no-throw-literal': 'error',
      'no-implicit-globals': 'error',
    },
  },
  {
    // The dashboard's page: ES modules in the browser, no build step.
    files: ['dashboard/public/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: { ...globals.browser },
    },
    rules: { strict: 'off' },
  },
  {
    // The browser tests hand functions to page.evaluate / waitForFunction: those run in the page.
    files: ['test/dashboard_browser.test.js'],
    languageOptions: { globals: { document: 'readonly', window: 'readonly', requestAnimationFrame: 'readonly' } },
  },
];
