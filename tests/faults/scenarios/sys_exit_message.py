"""sys.exit("message"): status 1 and the message on stderr."""
import sys

from trainbridge import worker
from _common import say


def check_config():
    say("checking config")
    sys.exit("config.yaml is missing the learning rate")


with worker.stage("config"):
    check_config()
