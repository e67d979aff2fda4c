"""The wire protocol, v1 (docs/PROTOCOL.md): pure values, no I/O, nothing done on import.

    from trainbridge.protocol import codec        # frames <-> messages (msgpack, HMAC)

Its rooms: codec (encode, decode, sign, check_seq), ascii (the escape rule), schema (the
kinds and their fields), limits, constants, errors (ProtocolError). All are pure.

Importing this package imports nothing: not msgpack, not zmq, not the worker or the client.
The worker (trainbridge.worker) and the client (trainbridge.bridge) both use it: the one
implementation of the wire (the Node client does not speak it; docs/CLIENT.md, "Rooms").
"""
