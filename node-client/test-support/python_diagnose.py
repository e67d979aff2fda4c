"""Runs the Python client's hang rules (bridge.diagnosis.diagnose_hang) on facts given as
JSON on stdin and prints the diagnosis as JSON, so the Node tests can feed both clients'
rules the same recorded evidence.

    echo '{"reason": "stall", "evidence": {...}, ...}' | python_diagnose.py
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from trainbridge.bridge.diagnosis import diagnose_hang

sys.stdout.write(json.dumps(diagnose_hang(json.load(sys.stdin)), ensure_ascii=True))
