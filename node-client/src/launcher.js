'use strict';
const fs = require('node:fs');
const path = require('node:path');
function resolvePython() {
  const venv = path.resolve(__dirname, '../../.venv/bin/python');
  if (fs.existsSync(venv)) return venv;
  return process.env.TRAINBRIDGE_PYTHON || 'python3';
}
module.exports = { resolvePython };
