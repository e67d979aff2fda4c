"""The protocol's one error: a frame that is not a valid v1 message. `reason` is one of the
stable codes of docs/PROTOCOL.md section 8. The Node twin is node-client/src/errors.js."""


class ProtocolError(Exception):
    """A frame that is not a valid v1 message. `reason` is a stable short code."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
