'use strict';
/**
 * Protocol v1 constants: the version a peer announces and the size of a frame's MAC
 * (docs/PROTOCOL.md sections 3 and 7). Plain values; protocol/constants.py holds the same names.
 */

const PROTOCOL_MAJOR = 1;
const PROTOCOL_VERSION = '1.1';
const SUPPORTED_MAJORS = [1]; // a hello with another major gets `refuse` (PROTOCOL.md section 7)
const MAC_SIZE = 32; // HMAC-SHA256, the second frame of every message

module.exports = { PROTOCOL_MAJOR, PROTOCOL_VERSION, SUPPORTED_MAJORS, MAC_SIZE };
