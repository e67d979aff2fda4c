"""Protocol v1 limits (docs/PROTOCOL.md section 4, "Limits"): what one message may hold.
Plain values, no imports; node-client/src/limits.js holds the same names.

A decoder rejects a frame over MAX_MESSAGE_BYTES or nested deeper than MAX_DEPTH; an encoder
cuts a text longer than its limit and names the field in `truncated`. TEXT_FIELDS carry
stacks and tracebacks and get the larger MAX_TEXT_CHARS."""

MAX_MESSAGE_BYTES = 1 << 20
MAX_FIELD_CHARS = 16 * 1024
MAX_TEXT_CHARS = 256 * 1024
MAX_ARRAY_ITEMS = 4096
MAX_MAP_ITEMS = 1024
MAX_DEPTH = 16
TEXT_FIELDS = frozenset({"traceback", "stack", "stacks", "text"})
SAFE_INT = 1 << 53  # the largest integer a JavaScript number holds exactly, plus one
INT64_MIN, UINT64_MAX = -(1 << 63), (1 << 64) - 1  # msgpack's integer range
