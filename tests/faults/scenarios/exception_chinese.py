"""An exception whose message is Chinese text (crosses the wire escaped, comes back whole)."""
from trainbridge import worker
from _common import say


def load_dataset():
    say("\u52a0\u8f7d\u6570\u636e")  # "loading data"
    raise FileNotFoundError("\u6570\u636e\u96c6\u4e0d\u5b58\u5728: /\u6570\u636e/train.json")


with worker.stage("data"):
    load_dataset()
