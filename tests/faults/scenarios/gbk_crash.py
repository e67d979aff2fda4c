"""GBK bytes on stderr (a Chinese Windows-style message), then a native crash."""
import ctypes
import os

from trainbridge import worker


def crash_after_gbk():
    os.write(2, "\u9519\u8bef: \u663e\u5b58\u4e0d\u8db3\n".encode("gbk"))  # "error: out of GPU memory"
    ctypes.string_at(0)


with worker.stage("train"):
    crash_after_gbk()
