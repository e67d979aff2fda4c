"""Protocol v1 constants: the version a peer announces and the size of a frame's MAC
(docs/PROTOCOL.md sections 3 and 7). Plain values, no imports."""

PROTOCOL_MAJOR = 1
PROTOCOL_VERSION = "1.1"
SUPPORTED_MAJORS = (1,)  # a hello with another major gets `refuse` (PROTOCOL.md section 7)
MAC_SIZE = 32  # HMAC-SHA256, the second frame of every message
