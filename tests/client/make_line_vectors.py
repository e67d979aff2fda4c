"""Writes vectors/lines.json, the line splitting/decoding cases that pin bridge/lines.py.

Run it only when the rules in bridge/lines.py change on purpose, then review the diff: the
committed file is the contract (tests/client/test_lines.py reads it).
Bytes are hex; `text` is the decoded line (undecodable bytes as lone \\udcXX surrogates,
which JSON keeps).
"""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
from trainbridge.bridge.lines import LineSplitter, decode_line  # noqa: E402 - after sys.path

ZH = "\u4e2d\u6587"  # "Chinese", 3 bytes a character in UTF-8, 2 in GBK
CASES = [
    ("lf lines", 64, [b"one\ntwo\n"]),
    ("crlf counts once", 64, [b"one\r\ntwo\r\n"]),
    ("crlf split between chunks", 64, [b"one\r", b"\ntwo\n"]),
    ("cr at chunk end then text", 64, [b"one\r", b"two\n"]),
    ("tqdm bar redraws with cr", 64, [b"\r 10%|#    |", b"\r 50%|###  |\r100%|#####|", b"\n"]),
    ("cr then crlf", 64, [b"a\r\r\nb\n"]),
    ("empty lines", 64, [b"\n\n\r\r\n"]),
    ("empty chunks are harmless", 64, [b"", b"a", b"", b"b\n", b""]),
    ("no trailing newline", 64, [b"last words"]),
    ("trailing cr at eof", 64, [b"50%\r"]),
    ("utf-8 sequence split between chunks", 64, [ZH.encode()[:2], ZH.encode()[2:] + b"\n"]),
    ("utf-8 sequence split in every byte", 64, [bytes([b]) for b in (ZH + "\n").encode()]),
    ("gbk line", 64, [("loss " + ZH + "\n").encode("gbk")]),
    ("gbk split between chunks", 64, [ZH.encode("gbk")[:1], ZH.encode("gbk")[1:] + b"\r\n"]),
    ("invalid utf-8 and invalid gbk", 64, [b"bad \xff\xfe bytes\n"]),
    ("truncated utf-8 sequence before ascii", 64, [b"\xe4\xb8 x\n"]),
    ("utf-8 with one bad byte escapes the whole line", 64, [ZH.encode() + b"\xff\n"]),
    ("0x80 alone is not gbk", 64, [b"\x80\n"]),
    ("gb18030 four-byte form is not gbk", 64, [b"\x81\x30\x81\x30\n"]),
    ("a2e3 is not gbk", 64, [b"\xa2\xe3\n"]),
    ("line of exactly max_line bytes", 8, [b"12345678\n"]),
    ("long line cut into pieces", 8, [b"1234567890abcdefghij\n"]),
    ("long line cut spanning chunks", 8, [b"12345", b"67890abc", b"def\n"]),
    ("cut does not split a utf-8 sequence", 8, [b"abcdef" + ZH.encode() + b"\n"]),
    ("long line without newline then eof", 8, [b"x" * 20]),
    ("long line of 4-byte characters", 8, [("\U0001f600" * 5 + "\n").encode()]),
]


def run(max_line, chunks):
    splitter = LineSplitter(max_line)
    raw = [line for chunk in chunks for line in splitter.feed(chunk)] + splitter.flush()
    lines = []
    for line in raw:
        text, encoding = decode_line(line.data)
        lines.append({"hex": line.data.hex(), "end": line.end, "encoding": encoding, "text": text})
    return lines


def main():
    cases = [
        {
            "name": name,
            "max_line": max_line,
            "chunks_hex": [c.hex() for c in chunks],
            "lines": run(max_line, chunks),
        }
        for name, max_line, chunks in CASES
    ]
    doc = {
        "about": "Output line splitting and decoding; see docs/CLIENT.md 'Output lines'. "
        "Feed chunks_hex in order to a splitter with max_line, then flush at EOF; "
        "each line has its bytes (hex), end (lf|cr|crlf|max|eof), encoding "
        "(utf-8|gbk|escaped) and text.",
        "cases": cases,
    }
    path = os.path.join(ROOT, "vectors", "lines.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
