'use strict';
/** The Python the tests run: the repo's venv, else $TRAINBRIDGE_PYTHON, else python3. */

const { resolvePython } = require('../src/launcher.js');

module.exports = { PYTHON: resolvePython() };
