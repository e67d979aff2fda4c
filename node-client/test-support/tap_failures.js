'use strict';
// The failing tests of a `node --test` TAP output, each with its error, printed again at the
// end (scripts/test): a long run's failures are otherwise somewhere in the middle of
// thousands of lines, and a log kept only by its tail (a CI record) loses why they failed.
//
//   node test-support/tap_failures.js FILE [MAX_LINES_EACH]

const fs = require('node:fs');

/**
 * The failed leaf tests of a TAP text: [{name, lines}], `lines` the YAML block under it (its
 * error, location, stack), at most `maxLines` of them. A suite that failed because a test in
 * it did ("subtestsFailed") is left out: its tests are listed.
 */
function failures(tap, maxLines = 40) {
  const lines = tap.split('\n');
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)not ok \d+ - (.*)$/.exec(lines[i]);
    if (!m) continue;
    const block = [];
    let j = i + 1;
    if (j < lines.length && lines[j].trim() === '---') {
      for (j += 1; j < lines.length && lines[j].trim() !== '...'; j++) block.push(lines[j].slice(m[1].length));
    }
    if (block.some((l) => /failureType: '(subtestsFailed)'/.test(l))) continue;
    out.push({ name: m[2], lines: block.length > maxLines ? [...block.slice(0, maxLines), `  (${block.length - maxLines} more lines above, in the full output)`] : block });
  }
  return out;
}

if (require.main === module) {
  const [file, max] = process.argv.slice(2);
  const found = failures(fs.readFileSync(file, 'utf8'), max ? Number(max) : 40);
  if (found.length) {
    process.stdout.write(`[test] node: ${found.length} failing test(s), again with their errors:\n`);
    for (const f of found) process.stdout.write(`not ok - ${f.name}\n${f.lines.join('\n')}\n`);
  }
}

module.exports = { failures };
