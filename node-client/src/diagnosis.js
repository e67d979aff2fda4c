'use strict';
/**
 * Diagnosis rules: from facts about a job to one answer {kind, summary, hint, evidence}.
 * Pure. The same rules as bridge/diagnosis.py, in the same three modules:
 *   diagnosis_stack.js  reading Python stacks and text
 *   diagnosis_end.js    end verdicts: why a process ended
 *   diagnosis_hang.js   hang verdicts: why a live job makes no progress
 * This module is the one name the rest of the client requires. The shared cases (facts in
 * -> kind, frame, summary, hint out) are vectors/diagnosis.json; both clients run them.
 */

const { parseStack, formatFrame, where, userFrame, tracebackInText, importingModule } = require('./diagnosis_stack.js');
const { NATIVE_SIGNALS, diagnoseEnd, stageAtEnd } = require('./diagnosis_end.js');
const { diagnoseHang } = require('./diagnosis_hang.js');

module.exports = {
  NATIVE_SIGNALS, parseStack, formatFrame, where, userFrame, tracebackInText, importingModule,
  diagnoseEnd, diagnoseHang, stageAtEnd,
};
